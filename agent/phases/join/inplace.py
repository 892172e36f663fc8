"""What the join phase changes on a node that has joined (kubeadm join never runs again
there): its Kubernetes patch release (spec.join.inPlaceVersion, agent.phases.join.
release), the kubelet's extra flags (spec.join.nodeRegistration.kubeletExtraArgs) and
the files of spec.join.files, all set in place by an in-place update (agent/inplace).
Each keeps what it replaced, journaled before the change is made: a later configuration
without it, such as the previous one when a change is rolled back (agent/daemon/
reconfigure.py), puts that back, so the node is never left half-updated."""

from __future__ import annotations

import hashlib
import os
from collections.abc import Callable
from dataclasses import replace

from agent.host import Host
from agent.phases.base import Change, PhaseContext, file_change
from agent.phases.join.cloudconfig import WriteFile
from agent.phases.join.filechange import data_file_change
from agent.phases.join.kubeletflags import FLAGS_FILE, keep, parse, render
from agent.phases.join.kubeletrestart import restart_kubelet
from agent.phases.join.managed import owner_ids
from agent.phases.join.release import release_changes
from agent.phases.join.result import JoinRecord, KeptFile
from agent.state import digest

BACKUPS = "/var/lib/machine-agent/kept-files"
"""The contents kept files replaced (root only), until they are put back."""


def in_place_changes(ctx: PhaseContext) -> list[Change]:
    changes = release_changes(ctx) + kept_files_changes(ctx)
    flags = kubelet_flags_change(ctx)
    return changes + ([flags] if flags is not None else [])


def kept_files_changes(ctx: PhaseContext) -> list[Change]:
    """spec.join.files written where they differ (the content each replaced saved first),
    and files kept before but no longer listed put back as they were."""
    record = ctx.journal.section(JoinRecord)
    wanted = {f.path: WriteFile(f.path, f.content.encode(), int(f.permissions, 8),
                                _owner(f.owner), False)
              for f in ctx.config.spec.join.files}
    changes = [_put_back(ctx, record, path, kept)
               for path, kept in sorted((record.kept_files or {}).items())
               if path not in wanted]
    for path, wf in wanted.items():
        change = data_file_change(ctx.host, wf, ctx.show_secrets) or \
            _mode_or_owner_change(ctx.host, wf)
        if change is not None:
            changes.append(replace(
                change, key=f"kept:{path}:{digest(wf.content.decode(errors='replace'))[7:19]}",
                summary=f"{change.summary} (kept in place)",
                action=_saving_first(ctx, record, path, change.action)))
    return changes


def _mode_or_owner_change(host: Host, wf: WriteFile) -> Change | None:
    """The same content with another mode or owner: written again with them."""
    owner = owner_ids(host, wf.owner)
    if not host.exists(wf.path) or host.mode_and_owner(wf.path) == \
            (wf.mode, *(owner or (os.geteuid(), os.getegid()))):
        return None

    def write(h: Host) -> None:
        h.write_file(wf.path, wf.content, mode=wf.mode, owner=owner)

    return Change(f"write:{wf.path}", f"set mode {wf.mode:04o} and owner "
                  f"{':'.join(wf.owner)} of {wf.path}", write)


def _owner(text: str) -> tuple[str, str]:
    user, _, group = text.partition(":")
    return user, group or user


def _backup(path: str) -> str:
    return f"{BACKUPS}/{hashlib.sha256(path.encode()).hexdigest()[:24]}"


def _saving_first(ctx: PhaseContext, record: JoinRecord, path: str,
                  write: Callable[[Host], None]) -> Callable[[Host], None]:
    def save_then_write(host: Host) -> None:
        kept = dict(record.kept_files or {})
        if path not in kept:  # the first change of this file: keep what it replaces
            if host.exists(path):
                mode, uid, gid = host.mode_and_owner(path)
                host.write_file(_backup(path), host.read_bytes(path), mode=0o600,
                                dir_mode=0o700)
                kept[path] = KeptFile(mode, uid, gid)
            else:
                kept[path] = KeptFile()
            record.kept_files = kept
            ctx.journal.save()
        write(host)

    return save_then_write


def _put_back(ctx: PhaseContext, record: JoinRecord, path: str, kept: KeptFile) -> Change:
    def put_back(host: Host) -> None:
        if kept.mode is None:
            host.remove(path)
        else:
            host.write_file(path, host.read_bytes(_backup(path)), mode=kept.mode,
                            owner=(kept.uid, kept.gid))
        record.kept_files = {p: k for p, k in (record.kept_files or {}).items()
                             if p != path} or None
        ctx.journal.save()  # before the backup goes: a run cut short here reads it again
        host.remove(_backup(path))

    what = (f"remove {path} (no longer in spec.join.files; there was none before)"
            if kept.mode is None else
            f"put {path} back as it was before (no longer in spec.join.files)")
    return Change(f"put-back:{path}", what, put_back)


def kubelet_flags_change(ctx: PhaseContext) -> Change | None:
    """nodeRegistration.kubeletExtraArgs kept in the kubelet's flags, the kubelet
    restarted and proven healthy; None when they are in force."""
    spec = ctx.config.spec.join
    record = ctx.journal.section(JoinRecord)
    desired = dict(spec.node_registration.kubelet_extra_args)
    text = ctx.host.read_text(FLAGS_FILE)
    if text is None or (not desired and not record.kubelet_flags):  # the usual case
        return None
    current = parse(text)
    flags, kept = keep(current, record.kubelet_flags or {}, desired)
    if flags == current:
        return None
    content = render(flags)
    write = file_change(ctx.host, FLAGS_FILE, content)
    if write is None:
        return None
    changed = ", ".join([f"--{n}={v}" for n, v in sorted(flags.items())
                         if current.get(n) != v] +
                        [f"--{n} removed" for n in sorted(current) if n not in flags])

    def rewrite_and_restart(host: Host) -> None:
        write.action(host)
        record.kubelet_flags = kept or None  # journaled with the file: a rollback starts here
        ctx.journal.save()
        restart_kubelet(host, spec, changed, ctx.progress)

    return replace(write, key=f"kubelet-flags:{digest(content)[7:19]}",
                   summary=f"set the kubelet's flags in place ({changed}) in {FLAGS_FILE}, "
                           "restart the kubelet and wait for it to answer healthy",
                   action=rewrite_and_restart, argv=tuple(spec.kubelet_restart_command))
