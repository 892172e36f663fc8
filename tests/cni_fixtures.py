"""Helpers for the CNI tests: bundles built from the real Debian plugins, hostile tar
members, a throwaway "node" network namespace, and tree snapshots."""

from __future__ import annotations

import hashlib
import io
import secrets
import subprocess
import tarfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

DEBIAN_PLUGINS = Path("/usr/lib/cni")
"""Where Debian's containernetworking-plugins installs them (CI installs the package)."""

CHAIN = ("bridge", "host-local", "portmap", "loopback")


def real_plugin(name: str) -> bytes:
    path = DEBIAN_PLUGINS / name
    assert path.is_file(), f"{path} missing: install Debian containernetworking-plugins"
    return path.read_bytes()


def tarball(members: list[tarfile.TarInfo | tuple[str, bytes]]) -> bytes:
    """A tar.gz of regular files given as (name, content) and raw TarInfo entries."""
    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode="w:gz") as tar:
        for member in members:
            if isinstance(member, tarfile.TarInfo):
                tar.addfile(member)
                continue
            name, data = member
            info = tarfile.TarInfo(name)
            info.size, info.mode = len(data), 0o755
            tar.addfile(info, io.BytesIO(data))
    return out.getvalue()


def plugin_bundle(names: tuple[str, ...] = CHAIN) -> bytes:
    """A bundle laid out as upstream's cni-plugins-linux-*.tgz: `./` then `./NAME`."""
    top = tarfile.TarInfo("./")
    top.type, top.mode = tarfile.DIRTYPE, 0o755
    return tarball([top, *((f"./{n}", real_plugin(n)) for n in names)])


def link(name: str, target: str, *, hard: bool = False) -> tarfile.TarInfo:
    info = tarfile.TarInfo(name)
    info.type = tarfile.LNKTYPE if hard else tarfile.SYMTYPE
    info.linkname = target
    return info


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def snapshot(root: Path) -> dict[str, tuple[bytes, int]]:
    """Every file and directory under root with its content and mode."""
    out: dict[str, tuple[bytes, int]] = {}
    for p in sorted(root.rglob("*")):
        rel = str(p.relative_to(root))
        if p.is_symlink():
            out[rel] = (str(p.readlink()).encode(), 0)
        elif p.is_file():
            out[rel] = (p.read_bytes(), p.stat().st_mode & 0o777)
        else:
            out[rel] = (b"<dir>", p.stat().st_mode & 0o777)
    return out


def install_image_plugins(root: Path, bin_dir: str = "/opt/cni/bin",
                          names: tuple[str, ...] = CHAIN) -> None:
    """Plugins 'from the image': the real binaries copied into the test root."""
    target = root / bin_dir.lstrip("/")
    target.mkdir(parents=True, exist_ok=True)
    for name in names:
        (target / name).write_bytes(real_plugin(name))
        (target / name).chmod(0o755)


def unique(prefix: str) -> str:
    """A name unique to this test run (namespaces, bridges: at most 15 characters)."""
    return f"{prefix}{secrets.token_hex(3)}"


def ip(*args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["ip", *args], capture_output=True, text=True, check=check,
                          timeout=30)


@contextmanager
def node_namespace() -> Iterator[str]:
    """A network namespace standing for the node: the plugins run in it, so the bridge
    lives there and never in the test machine's own namespace. Deleted afterwards."""
    name = unique("ma-node-")
    ip("netns", "add", name)
    try:
        ip("-n", name, "link", "set", "lo", "up")
        yield name
    finally:
        ip("netns", "delete", name, check=False)


def host_links() -> set[str]:
    return {line.split(":")[1].strip().split("@")[0]
            for line in ip("-o", "link", "show").stdout.splitlines()}


def netns_names() -> set[str]:
    return {line.split()[0] for line in ip("netns", "list").stdout.splitlines() if line}


def check_namespaces() -> set[str]:
    """The agent's throwaway pod namespaces that exist now. Only these are compared
    before and after: other suites on this machine create namespaces concurrently."""
    return {n for n in netns_names() if n.startswith("ma-cni-check-")}
