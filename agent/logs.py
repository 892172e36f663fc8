"""Logging set-up: readable lines on a terminal, JSON lines for journald, secrets redacted."""

from __future__ import annotations

import json
import logging
import re
import sys
import threading
import time
from typing import Any, TextIO

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
        line = f"{stamp} {record.levelname:<7} {where}: {record.getMessage()}"
        if record.exc_info and record.levelno >= logging.DEBUG and logging.root.level <= 10:
            line += "\n" + self.formatException(record.exc_info)
        return REDACT(line)


class _JSONFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        doc: dict[str, Any] = {
            "ts": time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(record.created))
            + f".{int(record.msecs):03d}Z",
            "level": record.levelname.lower(),
            "logger": record.name,
            "msg": record.getMessage(),
        }
        for key in ("phase", "reason"):
            if hasattr(record, key):
                doc[key] = getattr(record, key)
        return REDACT(json.dumps(doc, default=str))


def setup_logging(fmt: str = "text", level: str = "info", stream: TextIO | None = None) -> None:
    handler = logging.StreamHandler(stream or sys.stderr)
    handler.setFormatter(_JSONFormatter() if fmt == "json" else _TextFormatter())
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level.upper())
    # Libraries log request URLs and headers at debug level; keep them out.
    for noisy in ("urllib3", "pyroute2"):
        logging.getLogger(noisy).setLevel(logging.WARNING)
