"""One door to the node's files: only the Host port (agent/host/, with the in-root
resolution and the bounded read of agent/hostpath.py) opens, reads, lists or removes
files by path, so no read escapes its size bound or FIFO check and no write escapes an
image tree. A new file call anywhere else fails here until it goes through the Host, or
is listed below with the reason it is not a node's file."""

from __future__ import annotations

import ast
from pathlib import Path

import agent

AGENT = Path(agent.__file__).parent
DOORS = {"hostpath.py"}
DOOR_PACKAGE = "host/"

OS_CALLS = {"open", "listdir", "scandir", "stat", "lstat", "unlink", "remove", "rename",
            "replace", "mkdir", "makedirs", "rmdir", "chmod", "chown", "symlink",
            "readlink", "walk", "truncate", "access", "mkfifo", "link", "utime"}
OS_PATH_CALLS = {"exists", "isfile", "isdir", "islink", "getsize", "lexists"}
PATH_METHODS = {"read_text", "read_bytes", "write_text", "write_bytes", "unlink", "mkdir",
                "rmdir", "touch", "stat", "lstat", "is_file", "is_dir", "exists",
                "iterdir", "open", "symlink_to", "chmod", "glob", "rglob", "is_symlink"}

ALLOWED = {
    ("cli.py", "os.open"): "/dev/null for a daemonised child's output",
    ("commands.py", "os.path.isdir"): "doctor's --root given on the command line",
    ("doctor/registry.py", "os.walk"): "doctor's own scratch directory (tempfile)",
    ("doctor/registry.py", "os.unlink"): "doctor's own scratch directory (tempfile)",
    ("doctor/registry.py", "os.rmdir"): "doctor's own scratch directory (tempfile)",
    ("entrypoints.py", "open"): "the installed packages' metadata on sys.path",
    ("entrypoints.py", "os.listdir"): "the installed packages' metadata on sys.path",
    ("phases/cni/doctor.py", "os.access"): "an executable bit of a path from host.path",
    ("phases/cni/install.py", "tarfile.open"): "a bundle already read into memory",
    ("phases/join/preflight.py", "local.stat"): "whether host.path's runtime socket is one",
    ("tls.py", "os.path.isfile"): "which trust store file the system has, for ssl",
}


def file_calls(source: str) -> set[str]:
    """The calls in `source` that reach a file by its path."""
    found = set()
    for node in ast.walk(ast.parse(source)):
        if not isinstance(node, ast.Call):
            continue
        func = node.func
        if isinstance(func, ast.Name) and func.id == "open":
            found.add("open")
        elif isinstance(func, ast.Attribute):
            receiver = ast.unparse(func.value)
            by_os = (receiver == "os" and func.attr in OS_CALLS) or receiver == "shutil" \
                or (receiver == "os.path" and func.attr in OS_PATH_CALLS)
            on_a_path = func.attr in PATH_METHODS and receiver != "self" \
                and receiver.split(".")[-1] not in ("host", "h", "material")
            if by_os or on_a_path:
                found.add(f"{receiver}.{func.attr}")
    return found


def test_only_the_host_port_reaches_files_by_path() -> None:
    outside = set()
    for module in sorted(AGENT.rglob("*.py")):
        name = str(module.relative_to(AGENT))
        if name in DOORS or name.startswith(DOOR_PACKAGE):
            continue
        for call in file_calls(module.read_text()):
            if (name, call) not in ALLOWED:
                outside.add(f"{name}: {call}")
    assert not outside, ("file calls outside the Host port; read and write through "
                         f"agent.host.Host: {sorted(outside)}")


def test_the_guard_sees_the_calls_it_forbids() -> None:
    assert file_calls("open(p)\nos.listdir(d)\nPath(p).read_text()\nshutil.rmtree(d)\n"
                      "with open(f) as h: h.read()\nhost.read_text('/x')\n") == \
        {"open", "os.listdir", "Path(p).read_text", "shutil.rmtree"}


def test_every_allowance_is_still_needed() -> None:
    used = {(str(m.relative_to(AGENT)), call) for m in AGENT.rglob("*.py")
            for call in file_calls(m.read_text())}
    assert set(ALLOWED) <= used, sorted(set(ALLOWED) - used)
