"""How kubeadm ends on an error, by its version (kubernetes/kubernetes cmd/kubeadm).

Before 1.33, app/util/error.go checkErr: the message, then the stack-trace hint, and the
exit status by the error's kind (3 for a field-error Aggregate of validation, 2 for a
bare preflight error, else 1). From 1.33, app/util/errors/errors.go HandleError: every
error exits 1, printed as "error: <message>" and the same hint (exitWithCode)."""

from __future__ import annotations

import sys

STACK_HINT = "To see the stack trace of this error execute with --v=5 or higher"
UNIFORM_FROM = (1, 33)
"""The first kubeadm that exits 1 for every error, with the "error: " prefix."""


def minor_version(version: str) -> tuple[int, int]:
    major, minor = version.lstrip("v").split(".")[:2]
    return int(major), int(minor)


def exit_with(message: str, code: int, version: str) -> int:
    """Print `message` to stderr as kubeadm `version` does; its exit status."""
    if minor_version(version) >= UNIFORM_FROM:
        print(f"error: {message}\n{STACK_HINT}", file=sys.stderr)
        return 1
    print(f"{message}\n{STACK_HINT}", file=sys.stderr)
    return code
