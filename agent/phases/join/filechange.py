"""A bootstrap data file (or one kept in place) as a planned change: written atomically
with its mode and owner, its diff naming sizes and digests unless secrets are shown."""

from __future__ import annotations

import difflib
import hashlib

from agent.host import Host
from agent.logs import REDACT
from agent.phases.base import Change
from agent.phases.join.cloudconfig import WriteFile
from agent.phases.join.managed import owner_ids
from agent.phases.join.ondisk import current_content
from agent.state import digest


def data_file_change(host: Host, wf: WriteFile, show_secrets: bool = False) -> Change | None:
    """Write (or append to) a bootstrap data file. Its diff, which `plan` prints, names
    sizes and digests only: bootstrap files hold keys and credentials (client-key-data,
    AWS_SECRET_ACCESS_KEY=...), and a masking list cannot know them all; the contents
    with `plan --show-secrets`."""
    owner = owner_ids(host, wf.owner)
    current = current_content(host, wf.path)
    shown = "\n".join(REDACT(wf.content.decode(errors="replace")).splitlines()) + "\n"
    if wf.append:
        def append(h: Host) -> None:
            before = h.read_bytes(wf.path) if h.exists(wf.path) else b""
            h.write_file(wf.path, before + wf.content, mode=wf.mode, owner=owner)

        def fingerprint(h: Host) -> str:
            return digest(h.read_text(wf.path) if h.exists(wf.path) else None)

        return Change(f"append:{wf.path}", f"append to {wf.path}", append,
                      diff="".join(f"+{line}\n" for line in shown.splitlines())
                      if show_secrets else f"+ {sized(wf.content)}\n",
                      probe=fingerprint)
    if current == wf.content:
        return None
    if show_secrets:
        before = REDACT(current.decode(errors="replace")) if current is not None else ""
        diff = "".join(difflib.unified_diff(
            before.splitlines(keepends=True), shown.splitlines(keepends=True),
            fromfile=wf.path if current is not None else "/dev/null", tofile=wf.path))
    else:
        diff = (f"- {sized(current)}\n" if current is not None else "") + \
            f"+ {sized(wf.content)} (contents hidden: `plan --show-secrets` shows them)\n"

    def write(h: Host) -> None:
        h.write_file(wf.path, wf.content, mode=wf.mode, owner=owner)

    verb = "update" if current is not None else "create"
    return Change(f"write:{wf.path}", f"{verb} {wf.path} (mode {wf.mode:04o})", write,
                  diff=diff)


def sized(content: bytes) -> str:
    return f"{len(content)} bytes, sha256:{hashlib.sha256(content).hexdigest()[:12]}"
