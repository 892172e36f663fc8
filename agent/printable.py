"""Text made safe to print: every control character escaped, so a value (a command's
output, a unit name from bootstrap data, an interface key) cannot move the terminal's
cursor, change its colours or forge a log line. Imports nothing: the CLI wraps its
streams with it before anything else is loaded."""

from __future__ import annotations

from typing import Any, TextIO

_NAMED = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}
_ESCAPES = {code: _NAMED.get(chr(code), f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}")
            for code in (*range(0x20), *range(0x7f, 0xa0), 0x2028, 0x2029)}
"""Control characters (C0, DEL, C1) and Unicode's line separators, as escapes."""
_IN_LINES = {code: text for code, text in _ESCAPES.items() if chr(code) not in "\n\t"}


def printable(text: str, *, lines: bool = False) -> str:
    """`text` with every control character escaped (ESC as \\x1b, a newline as \\n), so
    nothing a value holds (a command's output, a unit name from bootstrap data) moves
    the terminal's cursor, changes its colours or forges a log line. `lines` keeps line
    breaks and tabs: text already laid out in lines (a table, a report)."""
    return text.translate(_IN_LINES if lines else _ESCAPES)


class PrintableStream:
    """A text stream that writes through `printable(lines=True)`: what the commands
    print reaches the terminal without raw control characters."""

    def __init__(self, stream: TextIO) -> None:
        self.stream = stream

    def write(self, text: str) -> int:
        self.stream.write(printable(text, lines=True))
        return len(text)

    def __getattr__(self, name: str) -> Any:  # flush, fileno, isatty, encoding, ...
        return getattr(self.stream, name)
