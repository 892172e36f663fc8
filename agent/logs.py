"""Logging set-up: the journal's native protocol under systemd (priority and fields such
as PHASE and REASON), readable lines on a terminal, JSON lines for log shippers; secrets
redacted from every one.
"""

from __future__ import annotations

import contextlib
import contextvars
import errno
import json
import logging
import os
import re
import socket
import struct
import sys
import threading
import time
from collections.abc import Iterator, Mapping
from typing import Any, TextIO

from agent.printable import printable

REDACTED = "***"

# Shapes of secrets that may reach a message even when nobody registered them.
_PATTERNS = [
    re.compile(r"(?i)(bearer\s+)[A-Za-z0-9._~+/=-]+"),
    re.compile(r"-----BEGIN [A-Z ]*PRIVATE KEY-----.*?-----END [A-Z ]*PRIVATE KEY-----", re.S),
    re.compile(r"\b[a-z0-9]{6}\.[a-z0-9]{16}\b"),  # kubeadm bootstrap token
    re.compile(r"\bnbt_[A-Za-z0-9]+\.[A-Za-z0-9]+"),  # NetBox v2 token
    # [ \t]*, not \s*: a YAML key such as `bootstrapToken:` must not eat the next line.
    # certificateKey: kubeadm's key to the control-plane certificates (kubeadm-certs).
    re.compile(r"(?i)((?:token|password|secret|certificate[_-]?key)[\"']?[ \t]*[:=][ \t]*"
               r"[\"']?)[^\s\"',}]+"),
]


class Redactor:
    """Removes secret values from text. Secrets are registered as they are loaded."""

    def __init__(self) -> None:
        self._secrets: set[str] = set()
        self._lock = threading.Lock()

    def add(self, secret: str | None) -> None:
        # Very short values would redact innocent text and protect nothing.
        if secret and len(secret) >= 6:
            with self._lock:
                self._secrets.add(secret)

    def __call__(self, text: str) -> str:
        with self._lock:
            secrets = sorted(self._secrets, key=len, reverse=True)
        for secret in secrets:
            text = text.replace(secret, REDACTED)
        for pattern in _PATTERNS:
            text = pattern.sub(
                lambda m: (m.group(1) if m.groups() else "") + REDACTED, text)
        return text


REDACT = Redactor()
"""The process-wide redactor: every log line and every report passes through it."""


class _TextFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        stamp = time.strftime("%H:%M:%S", time.localtime(record.created))
        where = getattr(record, "phase", None) or record.name.removeprefix("agent.")
        line = f"{stamp} {record.levelname:<7} {where}: {printable(record.getMessage())}"
        if record.exc_info and record.levelno >= logging.DEBUG and logging.root.level <= 10:
            line += "\n" + self.formatException(record.exc_info)
        return REDACT(line)


FIELDS = ("phase", "reason", "attempt")
"""`extra=` keys of a log record that become fields: the phase at work, the condition
reason of a failure, the attempt of a retried step."""

PHASE: contextvars.ContextVar[str | None] = contextvars.ContextVar("phase", default=None)
"""The phase at work (set by the orchestrator around it): every line logged meanwhile,
the phase's own modules' included, carries it as the field PHASE."""


@contextlib.contextmanager
def in_phase(name: str) -> Iterator[None]:
    token = PHASE.set(name)
    try:
        yield
    finally:
        PHASE.reset(token)


class _PhaseField(logging.Filter):
    """Gives a record without `phase` the phase at work, if any."""

    def filter(self, record: logging.LogRecord) -> bool:
        if getattr(record, "phase", None) is None:
            current = PHASE.get()
            if current is not None:
                record.phase = current
        return True


CONTEXT: dict[str, str] = {}
"""Fields of every line from now on, e.g. MACHINE once the Machine is known."""


def set_context(**fields: str | None) -> None:
    """Add (or with None, drop) fields every later line carries."""
    for key, value in fields.items():
        if value is None:
            CONTEXT.pop(key, None)
        else:
            CONTEXT[key] = value


class _JSONFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        doc: dict[str, Any] = {
            "ts": time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(record.created))
            + f".{int(record.msecs):03d}Z",
            "level": record.levelname.lower(),
            "logger": record.name,
            "msg": record.getMessage(),
            **CONTEXT,
        }
        for key in FIELDS:
            if hasattr(record, key):
                doc[key] = getattr(record, key)
        return REDACT(json.dumps(doc, default=str))


JOURNAL_SOCKET = "/run/systemd/journal/socket"
IDENTIFIER = "machine-agent"
PRIORITIES = {logging.CRITICAL: 2, logging.ERROR: 3, logging.WARNING: 4, logging.INFO: 6,
              logging.DEBUG: 7}
"""syslog(3) priorities: crit, err, warning, info, debug."""


class JournalHandler(logging.Handler):
    """Sends each record to journald in its native protocol (systemd's
    src/libsystemd/sd-journal/journal-send.c; "Native Journal Protocol" in systemd's
    docs): one datagram of fields, `KEY=value\n`, or for a value holding a newline
    `KEY\n`, its length as 64-bit little-endian, the value, `\n`. An entry too big for
    a datagram goes as a sealed memfd passed over the socket, as sd_journal_send does.

    `journalctl -p err -u machine-agent` then shows failures, and `journalctl
    PHASE=time`, `REASON=TimeNotSynchronized` or `MACHINE=ns/name` select by field.
    A lost entry (journald restarting) must never stop the agent: it goes to stderr."""

    def __init__(self, address: str = JOURNAL_SOCKET, fallback: TextIO | None = None) -> None:
        super().__init__()
        self.address = address
        self.fallback = fallback
        self.socket = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM | socket.SOCK_CLOEXEC)
        self.text = _TextFormatter()

    def fields(self, record: logging.LogRecord) -> dict[str, str]:
        # one entry whatever its lines: only the other control characters are escaped
        message = printable(record.getMessage(), lines=True)
        if record.exc_info and (logging.root.level <= logging.DEBUG or
                                record.levelno >= logging.CRITICAL):
            message += "\n" + self.text.formatException(record.exc_info)
        out = {"MESSAGE": message, "PRIORITY": str(PRIORITIES.get(record.levelno, 6)),
               "SYSLOG_IDENTIFIER": IDENTIFIER, "LOGGER": record.name,
               "CODE_FILE": record.pathname, "CODE_LINE": str(record.lineno),
               "CODE_FUNC": record.funcName}
        out.update({k.upper(): v for k, v in CONTEXT.items()})
        for key in FIELDS:
            value = getattr(record, key, None)
            if value is not None:
                out[key.upper()] = str(value)
        return {k: REDACT(v) for k, v in out.items()}

    def emit(self, record: logging.LogRecord) -> None:
        try:
            payload = encode_entry(self.fields(record))
            try:
                self.socket.sendto(payload, self.address)
            except OSError as err:
                if err.errno not in (errno.EMSGSIZE, errno.ENOBUFS):
                    raise
                self._send_memfd(payload)
        except OSError:
            if self.fallback is not None:
                self.fallback.write(self.text.format(record) + "\n")
                self.fallback.flush()

    def _send_memfd(self, payload: bytes) -> None:
        import fcntl

        fd = os.memfd_create("journal-entry", os.MFD_CLOEXEC | os.MFD_ALLOW_SEALING)
        try:
            os.write(fd, payload)
            fcntl.fcntl(fd, fcntl.F_ADD_SEALS, fcntl.F_SEAL_SHRINK | fcntl.F_SEAL_GROW |
                        fcntl.F_SEAL_WRITE | fcntl.F_SEAL_SEAL)
            # sendmsg, not socket.send_fds: that one drops its address argument.
            self.socket.sendmsg([], [(socket.SOL_SOCKET, socket.SCM_RIGHTS,
                                      struct.pack("i", fd))], 0, self.address)
        finally:
            os.close(fd)

    def close(self) -> None:
        self.socket.close()
        super().close()


def encode_entry(fields: Mapping[str, str]) -> bytes:
    """A journal entry in the native protocol (JournalHandler)."""
    out = bytearray()
    for key, value in fields.items():
        data = value.encode("utf-8", "replace")
        if b"\n" in data:
            out += key.encode() + b"\n" + struct.pack("<Q", len(data)) + data + b"\n"
        else:
            out += key.encode() + b"=" + data + b"\n"
    return bytes(out)


def connected_to_journal(stream: TextIO, env: Mapping[str, str]) -> bool:
    """Whether `stream` is systemd's connection to the journal: systemd sets
    JOURNAL_STREAM to its `device:inode` (systemd.exec(5)), which a redirected stream
    (`machine-agent status > file` in a unit's ExecStart) no longer matches."""
    named = env.get("JOURNAL_STREAM", "")
    try:
        device, inode = (int(x) for x in named.split(":"))
        st = os.fstat(stream.fileno())
    except (ValueError, OSError, AttributeError):
        return False
    return (st.st_dev, st.st_ino) == (device, inode)


class _ConsoleFormatter(_TextFormatter):
    """A text line as journald forwards one to the console (`[monotonic] name[pid]: `),
    for a unit whose standard error is the console and standard output the journal."""

    def format(self, record: logging.LogRecord) -> str:
        now = time.monotonic()
        return (f"[{int(now):5d}.{int(now % 1 * 1e6):06d}] {IDENTIFIER}[{os.getpid()}]: "
                + super().format(record))


def _log_uncaught(kind: type[BaseException], err: BaseException, tb: Any) -> None:
    if issubclass(kind, KeyboardInterrupt):
        sys.__excepthook__(kind, err, tb)
        return
    logging.getLogger("agent").critical("crashed: %s: %s", kind.__name__, err,
                                        exc_info=(kind, err, tb))


def setup_logging(fmt: str = "text", level: str = "info", stream: TextIO | None = None, *,
                  env: Mapping[str, str] | None = None,
                  journal_socket: str = JOURNAL_SOCKET,
                  stdout: TextIO | None = None) -> None:
    """`fmt` is `text`, `json`, `journal`, or `auto`: under systemd (JOURNAL_STREAM), the
    journal's native protocol; when standard error is then not the journal but the
    console (`StandardOutput=journal`, `StandardError=tty`, TTYPath=/dev/console), a
    text copy too, the console's only one; else text on standard error."""
    out = stream or sys.stderr
    handlers: list[logging.Handler] = []
    if fmt == "auto":
        environment = os.environ if env is None else env
        if connected_to_journal(out, environment):
            fmt = "journal"
        elif connected_to_journal(stdout or sys.stdout, environment):
            fmt = "journal"
            console = logging.StreamHandler(out)
            console.setFormatter(_ConsoleFormatter())
            handlers.append(console)
        else:
            fmt = "text"
    if fmt == "journal":
        handlers.insert(0, JournalHandler(journal_socket, fallback=None if handlers else out))
        # A crash's traceback would reach standard error alone (the console, not the
        # journal, in the unit): log it, as a critical entry with the traceback.
        sys.excepthook = _log_uncaught
    else:
        handler = logging.StreamHandler(out)
        handler.setFormatter(_JSONFormatter() if fmt == "json" else _TextFormatter())
        handlers.append(handler)
        if sys.excepthook is _log_uncaught:
            sys.excepthook = sys.__excepthook__
    root = logging.getLogger()
    for old in root.handlers:
        if isinstance(old, JournalHandler):
            old.close()
    for each in handlers:
        each.addFilter(_PhaseField())
    root.handlers[:] = handlers
    root.setLevel(level.upper())
    # Libraries log request URLs and headers at debug level; keep them out.
    for noisy in ("urllib3", "pyroute2"):
        logging.getLogger(noisy).setLevel(logging.WARNING)
