"""Doctor against the management stand-in and a joinable node (the kube suite's
fixtures), with what proves it changed nothing: the root tree and the API objects."""

from __future__ import annotations

import hashlib
import json
import os
import stat
import tempfile
from pathlib import Path
from typing import Any

import pytest

from agent.cli import main
from tests.integration.kube.conftest import (  # fixtures, re-exported below
    Admin,
    admin,
    node,
    world,
)

CONFLIST = {"cniVersion": "1.0.0", "name": "pods", "plugins": [
    {"type": "bridge", "bridge": "cni0", "ipam": {"type": "host-local",
                                                   "ranges": [[{"subnet": "10.244.0.0/24"}]]}},
    {"type": "portmap", "capabilities": {"portMappings": True}}]}


@pytest.fixture(autouse=True)
def scratch_in_tmp(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """doctor's scratch directory (key material it must not write under the root) in the
    test's own temporary tree."""
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))


def install_cni(root: Path) -> None:
    """What a node with a CNI shows: a conflist and the plugins it names."""
    conf = root / "etc/cni/net.d/10-pods.conflist"
    conf.parent.mkdir(parents=True, exist_ok=True)
    conf.write_text(json.dumps(CONFLIST))
    bin_dir = root / "opt/cni/bin"
    bin_dir.mkdir(parents=True, exist_ok=True)
    for name in ("bridge", "host-local", "portmap"):
        (bin_dir / name).write_text("#!/bin/sh\n")
        (bin_dir / name).chmod(0o755)


def tree(root: Path) -> dict[str, Any]:
    """Every entry under `root`: type, mode, size, mtime and content digest."""
    out: dict[str, Any] = {}
    for base, dirs, files in os.walk(root):
        for name in [*dirs, *files]:
            path = Path(base, name)
            st = path.lstat()
            digest = (hashlib.sha256(path.read_bytes()).hexdigest()
                      if stat.S_ISREG(st.st_mode) else None)
            out[str(path.relative_to(root))] = (stat.S_IFMT(st.st_mode), st.st_mode & 0o7777,
                                                st.st_size, st.st_mtime_ns, digest)
    return out


def api_objects(admin: Admin) -> dict[str, Any]:
    """resourceVersion of every object in the test's namespace (not of the lists: a
    list's own resourceVersion is the server's current one, which moves on a real
    cluster, and on the stand-in, while nothing here changes)."""
    out: dict[str, Any] = {}
    for path in ("/apis/cluster.x-k8s.io/v1beta2/namespaces/{ns}/machines",
                 "/apis/cluster.x-k8s.io/v1beta2/namespaces/{ns}/clusters",
                 "/api/v1/namespaces/{ns}/secrets", "/api/v1/namespaces/{ns}/configmaps",
                 "/apis/events.k8s.io/v1/namespaces/{ns}/events",
                 "/apis/rbac.authorization.k8s.io/v1/namespaces/{ns}/roles"):
        doc = admin.call("GET", path.format(ns=admin.ns))
        out[path] = sorted((i["metadata"]["name"], i["metadata"]["resourceVersion"])
                           for i in doc["items"])
    return out


def doctor(root: Path, *args: str, capsys: pytest.CaptureFixture[str]) -> tuple[int, Any]:
    """`machine-agent --root ROOT doctor --json ARGS`: exit status and the document."""
    capsys.readouterr()
    code = main(["--root", str(root), "doctor", "--json", *args])
    return code, json.loads(capsys.readouterr().out)


def by_name(doc: Any) -> dict[tuple[str, str], dict[str, Any]]:
    return {(c["phase"], c["name"]): c for c in doc["checks"]}


def failing(doc: Any) -> list[tuple[str, str]]:
    return [(c["phase"], c["name"]) for c in doc["checks"] if c["status"] == "fail"]


__all__ = ["Admin", "admin", "node", "world"]
