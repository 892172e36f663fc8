"""Bearer tokens from a file: read with a bound, checked before they reach a header (a
header that refuses a value shows it whole in its error), named by their file, never by
their value."""

from __future__ import annotations

from agent.config import checks
from agent.hostpath import read_regular

MAX_TOKEN_FILE = 64 << 10
"""A service account token is a few KiB; a token file bigger than this is not one."""

TOKEN_FIX = "write the bearer token alone on one line of the file"


def token_problem(token: str) -> str | None:
    """What is wrong with a token read from a file (the value is never shown)."""
    if not token:
        return "is empty"
    return checks.bearer_token(token)


def read_token_file(path: str) -> str:
    """The token in the file at `path` (a real path), stripped. OSError when it cannot
    be read, is not a regular file or is too big; ValueError naming the file when it
    holds no usable token."""
    try:
        token = read_regular(path, MAX_TOKEN_FILE).decode().strip()
    except UnicodeDecodeError as err:
        raise ValueError(f"{path} is not text") from err
    problem = token_problem(token)
    if problem:
        raise ValueError(f"the token in {path} {problem}")
    return token
