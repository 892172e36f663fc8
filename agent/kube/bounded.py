"""Bounds on what a server's answer may cost the agent: its size, the time it takes to
arrive, a watch line's length and the JSON's depth. A hostile or broken server (an
endless chunked body, one byte every half second, JSON nested 200,000 deep) then ends in
an error that says so, not in a hang, a MemoryError or a RecursionError traceback."""

from __future__ import annotations

from agent.records import loads

__all__ = ["MAX_ANSWER", "MAX_LINE", "loads"]

MAX_ANSWER = 64 << 20
"""Bytes of one answer's body: a list of every Machine of a large fleet is a few MiB."""

MAX_LINE = 16 << 20
"""Bytes of one watch event (an object is at most etcd's 1.5 MiB request limit, as JSON)."""

