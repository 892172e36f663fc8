"""CABPK bootstrap data in Ignition format, reduced to what the join phase carries out.

CABPK writes a Container Linux Config and converts it to Ignition spec 2.3.0 JSON
(cluster-api bootstrap/kubeadm/pkg/ignition/clc/clc.go, `clcTemplate`; the types are
flatcar/ignition config/v2_3/types): `storage.files` (the write_files, `/etc/kubeadm.yml`
with the kubeadm configuration, `/etc/kubeadm.sh` with the commands), `systemd.units`
(`kubeadm.service`, which runs `/bin/bash /etc/kubeadm.sh` once; `ntpd.service` with
/etc/ntp.conf, mount units when asked for), `passwd.users`, `storage.disks` and
`.filesystems`. Go's encoder writes every struct field that is itself a struct even when
it is empty, so a real document carries `"networkd":{}`, `"ignition":{"config":{},
"security":{"tls":{}},"timeouts":{}}` and `"verification":{}` on every file: a field
of the spec left unset (empty all the way down) asks for nothing and is accepted; an
unknown field, or a set one the agent does not carry out, is refused by name. Ignition
3.x documents (the same subset as spec 3 spells it) are read too.

The agent takes kubeadm.service's place: it does not install the unit (which would run
kubeadm a second time), and splits /etc/kubeadm.sh at the kubeadm line into the script
before it (run with `bash -e`: a failure stops the bootstrap before kubeadm, as the
unit's `set -e` script stops), the managed `kubeadm join|init`, the sentinel, and the
script after it. `ntpd.service` and the servers of its /etc/ntp.conf mean what
cloud-config's `ntp` means: delegated to the time phase (datakeys.py), the file not
written. File contents come only from `data:` URLs (RFC 2397, percent-encoded or
base64, optionally gzip-compressed, checked against `verification.hash` when given): the
agent fetches nothing from elsewhere.
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
from agent.phases.join.dropins import read_dropins
from agent.printable import printable

KUBEADM_UNIT = "kubeadm.service"
NTP_UNIT = "ntpd.service"
NTP_CONF = "/etc/ntp.conf"
SCRIPT = "/etc/kubeadm.sh"
ORDERING = f"systemd.units.{KUBEADM_UNIT}.dropins"
"""The `other` key of the drop-ins' ordering lines (a note in the plan: datakeys.py)."""
MAX_FILE = 16 * 1024 * 1024
"""Decompressed file contents larger than this are refused (a gzip bomb)."""
_SENTINEL_LINE = re.compile(r"^mkdir -p /run/cluster-api && echo success > "
                            r"/run/cluster-api/bootstrap-success\.complete$")
_KUBEADM_LINE = re.compile(r"^\s*kubeadm\s+(?:join|init)\b")
_EXEC_START = ("ExecStart=/etc/kubeadm.sh", "ExecStart=/bin/bash /etc/kubeadm.sh")
"""How CABPK's kubeadm.service runs the script (Cluster API 1.14; before it)."""

# The fields of Ignition's types (2.3 and 3.x), each: how the agent reads it. "read" ones
# are read below; the others, when set, go to `other` under their dotted name, where
# datakeys.py delegates or refuses them by name.
_TOP = {"ignition", "networkd", "passwd", "storage", "systemd", "kernelArguments"}
_IGNITION = {"version", "config", "security", "timeouts", "proxy"}
_STORAGE = {"files", "disks", "filesystems", "directories", "links", "raid", "luks"}
_FILE = {"path", "filesystem", "overwrite", "user", "group", "append", "contents", "mode"}
_CONTENTS = {"source", "compression", "verification", "httpHeaders"}
_UNIT = {"name", "enabled", "enable", "mask", "contents", "dropins"}


def unset(value: Any) -> bool:
    """Whether `value` is what Go writes for a field nobody set: null, an empty list or
    string, false, or an object whose every field is unset (`{"tls":{}}`)."""
    if isinstance(value, dict):
        return all(unset(v) for v in value.values())
    return value is None or value == [] or value == "" or value is False


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
                                 hint="CABPK writes Ignition 2.3.0; 3.x is read too")
    other: dict[str, Any] = {}
    _set_fields(doc, _TOP, "", other,
                read=("ignition", "networkd", "passwd", "storage", "systemd"))
    _set_fields(_mapping(doc.get("networkd"), "networkd"), {"units"}, "networkd.", other,
                read=())
    _set_fields(ign, _IGNITION, "ignition.", other, read=("version",))
    passwd = _mapping(doc.get("passwd"), "passwd")
    # users and groups: datakeys.py refuses them when set
    _set_fields(passwd, {"users", "groups"}, "passwd.", other, read=())
    storage = _mapping(doc.get("storage"), "storage")
    _set_fields(storage, _STORAGE, "storage.", other, read=("files",))
    files, total = [], 0
    for i, entry in enumerate(_list(storage.get("files"), "storage.files")):
        files.append(_file(entry, i))
        total += len(files[-1].content)
        if total > MAX_FILES_BYTES:  # as cloud-config's write_files; stops unpacking here
            raise BootstrapDataError(f"the ignition storage.files unpack to more than "
                                     f"{MAX_FILES_BYTES} bytes together")
    systemd = _mapping(doc.get("systemd"), "systemd")
    _set_fields(systemd, {"units"}, "systemd.", other, read=("units",))
    env_files: list[str] = []
    units = _units(_list(systemd.get("units"), "systemd.units"), other, env_files)
    if KUBEADM_UNIT not in units:
        raise BootstrapDataError(f"the ignition data does not enable {KUBEADM_UNIT}",
                                 hint="give CABPK's ignition output unchanged")
    if NTP_UNIT in units:
        other["ntp"] = {"enabled": True, "servers": _ntp_servers(files)}
        files = [f for f in files if f.path != NTP_CONF]
    script = next((f for f in files if f.path == SCRIPT), None)
    if script is None:
        raise BootstrapDataError(f"the ignition data has no {SCRIPT}, which "
                                 f"{KUBEADM_UNIT} runs")
    return CloudConfig(files, split_script(script.content.decode(errors="replace"),
                                           tuple(env_files)), other)


def _set_fields(obj: dict[str, Any], known: set[str], prefix: str, other: dict[str, Any],
                read: tuple[str, ...]) -> None:
    """Hand on every field of `obj` that is set and not read here (unknown ones even when
    empty: they are not Ignition's)."""
    for key, value in obj.items():
        if key in read:
            continue
        if key not in known or not unset(value):
            other[f"{prefix}{key}"] = value


def _units(entries: list[Any], other: dict[str, Any], env_files: list[str]) -> set[str]:
    """The names of the units the agent stands for (kubeadm.service, ntpd.service as
    CABPK writes them); every other unit goes to `other`; the EnvironmentFile= paths of
    kubeadm.service's drop-ins are added to `env_files`."""
    taken: set[str] = set()
    ordering: list[str] = []
    kubeadm = [False, False]  # has CABPK's contents, enabled
    for i, entry in enumerate(entries):
        unit = _mapping(entry, f"systemd.units[{i}]")
        name = str(unit.get("name", ""))
        where = f"systemd.units[{i}] ({printable(name)})"
        for key in unit:
            if key not in _UNIT:
                raise BootstrapDataError(f"ignition {where}.{key}: not a field of an "
                                         "Ignition unit", hint="remove it")
        enabled = bool(unit.get("enabled") or unit.get("enable"))
        if name == KUBEADM_UNIT:
            # additionalConfig's entry for the unit comes as one more entry of the list
            # (Ignition's Append); Ignition writes the contents of the one that has them,
            # every entry's drop-ins, and enables it when one says so.
            contents = unit.get("contents")
            if contents is not None and not set(_EXEC_START) & set(str(contents).splitlines()):
                raise BootstrapDataError(
                    f"ignition {where}: not CABPK's unit (it does not run {SCRIPT})",
                    hint="the agent runs kubeadm from /etc/kubeadm.sh in the unit's place; "
                         "give CABPK's kubeadm.service unchanged")
            if unit.get("mask"):
                raise BootstrapDataError(f"ignition {where}: masked, so kubeadm never runs",
                                         hint="give CABPK's kubeadm.service unchanged")
            dropins = read_dropins(_list(unit.get("dropins"), f"{where}.dropins"), where)
            ordering.extend(dropins.ordering)
            env_files.extend(dropins.environment_files)
            kubeadm[0] = kubeadm[0] or contents is not None
            kubeadm[1] = kubeadm[1] or enabled
        elif (name == NTP_UNIT and enabled and unset(unit.get("contents"))
              and unset(unit.get("dropins")) and not unit.get("mask")):
            taken.add(name)  # CABPK's ntp: enabled, nothing else (clc.go)
        else:
            other[f"systemd.units.{printable(name)}"] = unit  # a name is one line, escaped
    if all(kubeadm):
        taken.add(KUBEADM_UNIT)
    if ordering:
        other[ORDERING] = ordering
    return taken


def _ntp_servers(files: list[WriteFile]) -> list[str]:
    """The `server` lines of CABPK's /etc/ntp.conf (none: ntp enabled without servers)."""
    conf = next((f for f in files if f.path == NTP_CONF), None)
    if conf is None:
        return []
    servers = []
    for number, line in enumerate(conf.content.decode(errors="replace").splitlines(), 1):
        words = line.split()
        if not words or words[0].startswith("#") or words[0] == "restrict":
            continue
        if words[0] != "server" or len(words) != 2:
            raise BootstrapDataError(
                f"ignition {NTP_CONF} line {number}: {line.strip()!r} is not CABPK's "
                f"`server HOST`", hint="the time phase sets up the servers of "
                "KubeadmConfig ntp.servers; give them there, and nothing else in the file")
        servers.append(words[1])
    return servers


def split_script(text: str, env_files: tuple[str, ...] = ()) -> list[Step]:
    """/etc/kubeadm.sh as steps: the commands before kubeadm as one script, the managed
    kubeadm step (with the sentinel line after it), the commands after it. Under CABPK's
    `set -e` a failing command before kubeadm ends the script, and kubeadm never runs:
    that step stops the bootstrap."""
    lines = text.splitlines()
    if lines and lines[0].startswith("#!"):
        lines = lines[1:]
    errexit = bool(lines) and lines[0].strip() == "set -e"
    if errexit:
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
        steps.append(_script("\n".join(before), "preKubeadmCommands", errexit, env_files))
    steps.append(KubeadmJoin(step.config_path, step.ignore_preflight_errors, sentinel,
                             step.shown, step.command))
    if "\n".join(after).strip():
        steps.append(_script("\n".join(after), "postKubeadmCommands", errexit, env_files))
    return steps


def _script(body: str, what: str, errexit: bool, env_files: tuple[str, ...]) -> Command:
    # One script, as the unit runs it: heredocs and `set -e` keep their meaning.
    return Command(("bash", *(("-e",) if errexit else ()), "-c", body.strip() + "\n"),
                   f"{what} of {SCRIPT}", body.strip(), label=SCRIPT,
                   stops=errexit and what == "preKubeadmCommands", env_files=env_files)


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
    for key in entry:
        if key not in _FILE:
            raise BootstrapDataError(f"ignition {where}.{key}: not a field of an Ignition "
                                     "file", hint="remove it")
    if entry.get("overwrite") is False:
        raise BootstrapDataError(f"ignition {where}.overwrite: false is not carried out: "
                                 "the agent writes the whole file",
                                 hint="remove overwrite")
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
    for key in spec:
        if key not in ("id", "name"):
            raise BootstrapDataError(f"ignition {where}.{key}: not a field of an Ignition "
                                     "owner", hint="give name")
    if "id" in spec and spec.get("id") not in (None, 0):
        raise BootstrapDataError(f"ignition {where}.id: owners are taken by name",
                                 hint="give name instead of id")
    name = spec.get("name") or "root"
    if not isinstance(name, str) or not re.match(r"^[a-z_][a-z0-9_-]*\$?$", name):
        raise BootstrapDataError(f"ignition {where}.name {name!r} is not a user or group")
    return name


def _contents(contents: dict[str, Any], where: str) -> bytes:
    for key, value in contents.items():
        if key not in _CONTENTS or (key == "httpHeaders" and not unset(value)):
            raise BootstrapDataError(f"ignition {where}.contents.{key}: not carried out",
                                     hint="inline the contents as a data: URL, as CABPK "
                                          "does")
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
