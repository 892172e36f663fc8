"""CABPK bootstrap data in Ignition format, reduced to what the join phase carries out.

CABPK writes a Container Linux Config and converts it to Ignition JSON (cluster-api
bootstrap/kubeadm/pkg/ignition/clc/clc.go, `clcTemplate`): `storage.files` (the write_files,
`/etc/kubeadm.yml` with the kubeadm configuration, `/etc/kubeadm.sh` with the commands),
`systemd.units` (`kubeadm.service`, which runs `/bin/bash /etc/kubeadm.sh` once; and
`ntpd.service` or mount units when asked for), `passwd.users`. Versions 2.x (what the CLC
converter emits) and 3.x (the same subset, as Ignition spec 3 spells it) are read.

The agent takes kubeadm.service's place: it does not install the unit (which would run
kubeadm a second time), and splits /etc/kubeadm.sh at the kubeadm line into the script
before it (run with `bash -e`, as the unit's `set -e` script does), the managed
`kubeadm join|init`, the sentinel, and the script after it. File contents come only from
`data:` URLs (RFC 2397, percent-encoded or base64, optionally gzip-compressed, checked
against `verification.hash` when given): the agent fetches nothing from elsewhere.
Everything else is handed on by name to agent.phases.join.datakeys (delegated or
refused); `ignition.timeouts`, `.proxy` and `.security` only concern fetching remote
contents, which a configuration of data URLs never does.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import re
import urllib.parse
import zlib
from typing import Any

from agent import records
from agent.config import checks
from agent.phases.join.cloudconfig import (
    MAX_FILES_BYTES,
    BootstrapDataError,
    CloudConfig,
    Command,
    KubeadmJoin,
    Step,
    WriteFile,
    shell_step,
)
from agent.printable import printable

KUBEADM_UNIT = "kubeadm.service"
SCRIPT = "/etc/kubeadm.sh"
MAX_FILE = 16 * 1024 * 1024
"""Decompressed file contents larger than this are refused (a gzip bomb)."""
_FETCH_ONLY = ("timeouts", "proxy", "security")
_SENTINEL_LINE = re.compile(r"^mkdir -p /run/cluster-api && echo success > "
                            r"/run/cluster-api/bootstrap-success\.complete$")
_KUBEADM_LINE = re.compile(r"^\s*kubeadm\s+(?:join|init)\b")


def parse_ignition(text: str) -> CloudConfig:
    try:
        doc = records.loads(text)  # deep nesting: a ValueError, not a RecursionError
    except ValueError as err:
        raise BootstrapDataError(f"the ignition bootstrap data is not JSON: {err}") from err
    if not isinstance(doc, dict):
        raise BootstrapDataError("the ignition bootstrap data is not a JSON object")
    ign = _mapping(doc.get("ignition"), "ignition")
    version = str(ign.get("version", ""))
    if not re.match(r"^[23]\.\d+\.\d+", version):
        raise BootstrapDataError(f"ignition.version {version!r} is not 2.x or 3.x",
                                 hint="CABPK writes Ignition 2.3; 3.x is read too")
    other: dict[str, Any] = {}
    for key, value in ign.items():
        if key not in ("version", *_FETCH_ONLY):
            other[f"ignition.{key}"] = value
    for key, value in doc.items():
        if key not in ("ignition", "storage", "systemd", "passwd"):
            other[key] = value
    passwd = _mapping(doc.get("passwd"), "passwd")
    for key, value in passwd.items():
        other[f"passwd.{key}"] = value
    storage = _mapping(doc.get("storage"), "storage")
    for key, value in storage.items():
        if key != "files":
            other[f"storage.{key}"] = value
    files, total = [], 0
    for i, entry in enumerate(_list(storage.get("files"), "storage.files")):
        files.append(_file(entry, i))
        total += len(files[-1].content)
        if total > MAX_FILES_BYTES:  # as cloud-config's write_files; stops unpacking here
            raise BootstrapDataError(f"the ignition storage.files unpack to more than "
                                     f"{MAX_FILES_BYTES} bytes together")
    runs_kubeadm = False
    systemd = _mapping(doc.get("systemd"), "systemd")
    for key, value in systemd.items():
        if key != "units":
            other[f"systemd.{key}"] = value
    for i, unit in enumerate(_list(systemd.get("units"), "systemd.units")):
        unit = _mapping(unit, f"systemd.units[{i}]")
        name = str(unit.get("name", ""))
        if name == KUBEADM_UNIT:
            runs_kubeadm = bool(unit.get("enabled"))
            continue
        other[f"systemd.units.{printable(name)}"] = unit  # a name is one line, escaped
    if not runs_kubeadm:
        raise BootstrapDataError(f"the ignition data does not enable {KUBEADM_UNIT}",
                                 hint="give CABPK's ignition output unchanged")
    script = next((f for f in files if f.path == SCRIPT), None)
    if script is None:
        raise BootstrapDataError(f"the ignition data has no {SCRIPT}, which "
                                 f"{KUBEADM_UNIT} runs")
    return CloudConfig(files, split_script(script.content.decode(errors="replace")), other)


def split_script(text: str) -> list[Step]:
    """/etc/kubeadm.sh as steps: the commands before kubeadm as one `bash -e` script, the
    managed kubeadm step (with the sentinel line after it), the commands after it."""
    lines = text.splitlines()
    if lines and lines[0].startswith("#!"):
        lines = lines[1:]
    if lines and lines[0].strip() == "set -e":
        lines = lines[1:]
    at = [i for i, line in enumerate(lines) if _KUBEADM_LINE.match(line)]
    if len(at) != 1:
        raise BootstrapDataError(f"{SCRIPT} runs kubeadm join or init {len(at)} times",
                                 hint="the script must run `kubeadm join|init --config "
                                      "FILE` exactly once, on a line of its own")
    before, line, after = lines[:at[0]], lines[at[0]], lines[at[0] + 1:]
    sentinel = bool(after) and _SENTINEL_LINE.match(after[0].strip()) is not None
    if sentinel:
        after = after[1:]
    step = shell_step(line.strip(), f"{SCRIPT} line {at[0] + 1}")
    if not isinstance(step, KubeadmJoin):  # shell_step returns the managed step here
        raise BootstrapDataError(f"{SCRIPT}: the kubeadm line is not understood")
    steps: list[Step] = []
    if "\n".join(before).strip():
        steps.append(_script("\n".join(before), "preKubeadmCommands"))
    steps.append(KubeadmJoin(step.config_path, step.ignore_preflight_errors, sentinel,
                             step.shown, step.command))
    if "\n".join(after).strip():
        steps.append(_script("\n".join(after), "postKubeadmCommands"))
    return steps


def _script(body: str, what: str) -> Command:
    # One script, as the unit runs it: heredocs and `set -e` keep their meaning.
    return Command(("bash", "-e", "-c", body.strip() + "\n"), f"{what} of {SCRIPT}")


def _mapping(value: Any, where: str) -> dict[str, Any]:
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise BootstrapDataError(f"ignition {where} is not an object")
    return value


def _list(value: Any, where: str) -> list[Any]:
    if value is None:
        return []
    if not isinstance(value, list):
        raise BootstrapDataError(f"ignition {where} is not a list")
    return value


def _file(entry: Any, index: int) -> WriteFile:
    where = f"storage.files[{index}]"
    entry = _mapping(entry, where)
    path = entry.get("path")
    if not isinstance(path, str) or (problem := checks.absolute_path(path)):
        raise BootstrapDataError(f"ignition {where}.path: "
                                 f"{problem if isinstance(path, str) else 'missing'}")
    if entry.get("filesystem") not in (None, "root"):
        raise BootstrapDataError(f"ignition {where}.filesystem {entry['filesystem']!r}: "
                                 "only the root filesystem is written",
                                 hint="CABPK writes every file to root")
    if entry.get("append"):
        raise BootstrapDataError(f"ignition {where}.append: not carried out",
                                 hint="write the whole file")
    mode = entry.get("mode", 0o644)
    if not isinstance(mode, int) or isinstance(mode, bool) or not 0 <= mode <= 0o7777:
        raise BootstrapDataError(f"ignition {where}.mode {mode!r} is not a file mode "
                                 "(a decimal number, e.g. 384 for 0600)")
    owner = (_owner(entry.get("user"), f"{where}.user"),
             _owner(entry.get("group"), f"{where}.group"))
    contents = _mapping(entry.get("contents"), f"{where}.contents")
    return WriteFile(path, _contents(contents, where), mode, owner, False)


def _owner(value: Any, where: str) -> str:
    spec = _mapping(value, where)
    if "id" in spec and spec.get("id") not in (None, 0):
        raise BootstrapDataError(f"ignition {where}.id: owners are taken by name",
                                 hint="give name instead of id")
    name = spec.get("name") or "root"
    if not isinstance(name, str) or not re.match(r"^[a-z_][a-z0-9_-]*\$?$", name):
        raise BootstrapDataError(f"ignition {where}.name {name!r} is not a user or group")
    return name


def _contents(contents: dict[str, Any], where: str) -> bytes:
    source = contents.get("source")
    if source is None:
        return b""
    if not isinstance(source, str) or not source.startswith("data:"):
        scheme = str(source).split(":", 1)[0]
        raise BootstrapDataError(f"ignition {where}.contents.source: a {scheme!r} URL is "
                                 "not fetched, only data: URLs are read",
                                 hint="inline the contents (CABPK always does)")
    header, comma, payload = source[5:].partition(",")
    if not comma:
        raise BootstrapDataError(f"ignition {where}.contents.source is not a data URL")
    try:
        if header.endswith(";base64"):
            raw = base64.b64decode(urllib.parse.unquote(payload), validate=True)
        else:
            raw = urllib.parse.unquote_to_bytes(payload)
    except binascii.Error as err:
        raise BootstrapDataError(f"ignition {where}.contents.source: bad base64: "
                                 f"{err}") from err
    _verify(raw, contents.get("verification"), where)
    compression = contents.get("compression") or ""
    if compression == "gzip":
        return _gunzip(raw, where)
    if compression:
        raise BootstrapDataError(f"ignition {where}.contents.compression {compression!r}: "
                                 "only gzip is known")
    return raw


def _verify(raw: bytes, verification: Any, where: str) -> None:
    """Ignition's verification.hash (`sha512-HEX` or `sha256-HEX`), over the contents as
    given (before decompression)."""
    wanted = _mapping(verification, f"{where}.contents.verification").get("hash")
    if not wanted:
        return
    algorithm, _, digest = str(wanted).partition("-")
    if algorithm not in ("sha512", "sha256"):
        raise BootstrapDataError(f"ignition {where}.contents.verification.hash: "
                                 f"{algorithm!r} is not sha512 or sha256")
    if not hmac.compare_digest(hashlib.new(algorithm, raw).hexdigest(), digest.lower()):
        raise BootstrapDataError(f"ignition {where}: the contents do not match "
                                 "verification.hash", hint="the bootstrap data was altered")


def _gunzip(raw: bytes, where: str) -> bytes:
    unpacker = zlib.decompressobj(wbits=16 + zlib.MAX_WBITS)
    try:
        out = unpacker.decompress(raw, MAX_FILE + 1)
    except zlib.error as err:
        raise BootstrapDataError(f"ignition {where}: gzip contents do not unpack: "
                                 f"{err}") from err
    if len(out) > MAX_FILE:
        raise BootstrapDataError(f"ignition {where}: unpacks to more than {MAX_FILE} bytes")
    if not unpacker.eof:
        raise BootstrapDataError(f"ignition {where}: gzip contents do not unpack: the "
                                 "gzip stream is truncated")
    return out
