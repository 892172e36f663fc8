"""CABPK bootstrap data (cloud-config) parsed into what the join phase applies.

CABPK writes a `#cloud-config` document (cluster-api bootstrap/kubeadm/internal/cloudinit):
`write_files` (the JoinConfiguration at /run/kubeadm/kubeadm-join-config.yaml, or for the
first control plane the Cluster- and InitConfiguration at /run/kubeadm/kubeadm.yaml;
certificates, user files), `bootcmd`, and `runcmd` (preKubeadmCommands, then `kubeadm
join|init --config ... && echo success > /run/cluster-api/bootstrap-success.complete`,
then postKubeadmCommands): controlplane_init.go, controlplane_join.go, node.go. The agent
applies the files itself and runs the commands in order, except the kubeadm entry, which
becomes the agent's managed join (classified, safe to repeat). Nothing else is ever run
blindly: a kubeadm entry the agent does not understand is refused; the other keys are
delegated or refused by name (datakeys.py).
"""

from __future__ import annotations

import base64
import binascii
import re
import shlex
import zlib
from dataclasses import field
from typing import Any

from agent.config import checks
from agent.config.fragment import yaml_structure_problem
from agent.errors import PermanentError, Reason, shown
from agent.phases.join.template import InstanceData, render_cloud_config
from agent.recordtype import record

SENTINEL = "/run/cluster-api/bootstrap-success.complete"
"""CABPK's success sentinel (cluster-api: bootstrap/kubeadm/internal/cloudinit/cloudinit.go)."""

# write_files encodings cloud-init accepts (cloudinit/config/cc_write_files.py).
_B64 = {"b64", "base64"}
_GZ = {"gz", "gzip"}
_GZ_B64 = {"gz+base64", "gzip+base64", "gz+b64", "gzip+b64"}
_PLAIN = {"text/plain", ""}

_SENTINEL_COMMAND = f"echo success > {SENTINEL}"

MAX_FILE_BYTES = 16 << 20
"""The most one write_files entry may unpack to: CABPK's files (certificates, kubeadm
configuration) are kilobytes, and a gzip bomb of 389 kB unpacked to 1.5 GB, held in memory
and diffed by `plan`."""
MAX_FILES_BYTES = 64 << 20
"""The most all write_files entries together may unpack to."""


class BootstrapDataError(PermanentError):
    reason = Reason.ConfigInvalid


@record(frozen=True)
class WriteFile:
    path: str
    content: bytes
    mode: int
    owner: tuple[str, str]
    append: bool


@record(frozen=True)
class Command:
    """A runcmd entry run as given: a string through `sh -c` (as cloud-init does), a
    list as the argument vector. `shown` is what the journal, the log, conditions,
    Events and `plan` say of it: the program and the size and digest of the rest, never
    the arguments (`curl -u admin:pw`); `text` is the command itself, for
    `plan --show-secrets` only."""

    argv: tuple[str, ...]
    shown: str
    text: str = ""
    label: str | None = None
    """What names it in errors and the journal (None: its runcmd or bootcmd entry)."""
    stops: bool = False
    """Whether its failure ends the bootstrap before kubeadm (Ignition's /etc/kubeadm.sh
    under `set -e`); cloud-init's runcmd goes on past a failure."""
    env_files: tuple[str, ...] = ()
    """systemd EnvironmentFile= paths whose variables it runs with (kubeadm.service's
    drop-ins: agent.phases.join.dropins)."""


@record(frozen=True)
class KubeadmJoin:
    """The runcmd entry that runs kubeadm (`join`, or `init` on the first control plane);
    executed by the agent's managed join."""

    config_path: str
    ignore_preflight_errors: tuple[str, ...]
    sentinel: bool
    shown: str
    command: str = "join"
    """`join` or `init`."""


Step = Command | KubeadmJoin


@record(frozen=True)
class CloudConfig:
    files: list[WriteFile]
    steps: list[Step]
    other: dict[str, Any] = field(default_factory=dict)
    """Every other top-level key (ntp, users, mounts, ...) with its value: each is
    delegated or refused by name (agent.phases.join.datakeys), never skipped."""
    boot: list[Command] = field(default_factory=list)
    """bootcmd entries: run first, before the files are written (as cloud-init runs
    bootcmd in its init stage, before write_files)."""

    @property
    def join(self) -> KubeadmJoin:
        found = [s for s in self.steps if isinstance(s, KubeadmJoin)]
        if len(found) != 1:
            raise BootstrapDataError(
                f"the bootstrap data has {len(found)} `kubeadm join` or `kubeadm init` "
                "commands", hint="the bootstrap data must run `kubeadm join --config FILE` "
                                 "or `kubeadm init --config FILE` exactly once")
        return found[0]

    def file(self, path: str) -> WriteFile | None:
        return next((f for f in self.files if f.path == path), None)


_LAST: list[tuple[tuple[str, str | None, InstanceData | None], CloudConfig]] = []
"""The last parse and what it was of: a run resolves its join up to four times (plan,
apply, after the pre-commands, the report), each from the same data."""


def parse_cloud_config(text: str, *, node_name: str | None,
                       instance: InstanceData | None = None) -> CloudConfig:
    """Parse CABPK cloud-config; a `## template: jinja` document is rendered first with
    the node's cloud-init instance data (agent.phases.join.template), or without it with
    `node_name` as the node-name variables. Nothing parsed is changed by its readers, so
    the same input's CloudConfig is handed out again."""
    key = (text, node_name, instance)
    if _LAST and _LAST[0][0] == key:
        return _LAST[0][1]
    parsed = _parse_cloud_config(text, node_name, instance)
    _LAST[:] = [(key, parsed)]
    return parsed


def _parse_cloud_config(text: str, node_name: str | None,
                        instance: InstanceData | None) -> CloudConfig:
    import yaml

    from agent import yamlsafe

    text = render_cloud_config(text, instance, node_name)
    lines = text.splitlines()
    if not lines or lines[0].strip() != "#cloud-config":
        raise BootstrapDataError("the bootstrap data is not a cloud-config document "
                                 "(its first line is not #cloud-config)",
                                 hint="the Machine's bootstrap Secret must have format "
                                      "cloud-config")
    try:
        refused = yaml_structure_problem(text, yamlsafe.LOADER)
        if refused is not None:
            raise BootstrapDataError(f"the bootstrap data {refused[0]}", hint=refused[1])
        doc = yamlsafe.load(text)
    except yaml.YAMLError as err:
        raise BootstrapDataError(f"the bootstrap data is not valid YAML: "
                                 f"{shown(str(err), 200)}") from None
    if not isinstance(doc, dict):
        raise BootstrapDataError("the bootstrap data is not a cloud-config mapping")
    files = _write_files(doc)
    if sum(len(f.content) for f in files) > MAX_FILES_BYTES:
        raise BootstrapDataError(f"the bootstrap data's write_files unpack to more than "
                                 f"{MAX_FILES_BYTES} bytes together")
    steps = [_step(entry, i) for i, entry in enumerate(_list(doc, "runcmd"))]
    boot = [_boot_step(entry, i) for i, entry in enumerate(_list(doc, "bootcmd"))]
    other = {str(k): v for k, v in doc.items() if k not in ("write_files", "runcmd", "bootcmd")}
    return CloudConfig(files, steps, other, boot)


def _boot_step(entry: Any, index: int) -> Command:
    step = _step(entry, index)
    if not isinstance(step, Command):
        raise BootstrapDataError(f"cloud-config bootcmd[{index}] runs kubeadm",
                                 hint="run kubeadm from runcmd, as CABPK does")
    return step


def _list(doc: dict[str, Any], key: str) -> list[Any]:
    value = doc.get(key) or []
    if not isinstance(value, list):
        raise BootstrapDataError(f"cloud-config {key} is not a list")
    return value


_WRITE_FILE_KEYS = {"path", "content", "owner", "permissions", "encoding", "append", "defer"}


def _write_files(doc: dict[str, Any]) -> list[WriteFile]:
    """write_files in the order cloud-init writes them: the others in its init stage, the
    `defer: true` ones (cc_write_files_deferred) in its final stage, still before the
    runcmd script (scripts-user comes after write-files-deferred in cloud_final_modules).
    Deferring only waits for users and packages, which the agent does not make."""
    entries = _list(doc, "write_files")
    files = [(_write_file(entry, i), _flag(entry, "defer", i))
             for i, entry in enumerate(entries)]
    return [f for f, defer in files if not defer] + [f for f, defer in files if defer]


def _flag(entry: dict[str, Any], key: str, index: int) -> bool:
    value = entry.get(key, False)
    if not isinstance(value, bool):
        raise BootstrapDataError(f"cloud-config write_files[{index}].{key}: {value!r} is not "
                                 "true or false")
    return value


def _write_file(entry: Any, index: int) -> WriteFile:
    where = f"write_files[{index}]"
    if not isinstance(entry, dict) or not isinstance(entry.get("path"), str):
        raise BootstrapDataError(f"cloud-config {where} has no path")
    for key in entry:
        if key == "source":
            raise BootstrapDataError(f"cloud-config {where}.source: the agent fetches no "
                                     "file contents from a URL",
                                     hint="give the contents in `content` (CABPK puts a "
                                          "contentFrom Secret's data there)")
        if key not in _WRITE_FILE_KEYS:
            raise BootstrapDataError(f"cloud-config {where}.{key}: not a write_files key "
                                     "cloud-init knows", hint="remove it")
    path = entry["path"]
    if problem := checks.absolute_path(path):
        raise BootstrapDataError(f"cloud-config {where}.path: {problem}")
    return WriteFile(path, _decode(entry.get("content", ""), entry.get("encoding", ""), where),
                     _mode(entry.get("permissions", "0644"), where),
                     _owner(entry.get("owner", "root:root"), where),
                     _flag(entry, "append", index))


def _gunzip(raw: bytes, where: str) -> bytes:
    """gzip data unpacked, never past MAX_FILE_BYTES (the unpacker stops there)."""
    unpacker = zlib.decompressobj(wbits=16 + zlib.MAX_WBITS)
    out = unpacker.decompress(raw, MAX_FILE_BYTES + 1)
    if len(out) > MAX_FILE_BYTES:
        raise BootstrapDataError(f"cloud-config {where}: content unpacks to more than "
                                 f"{MAX_FILE_BYTES} bytes (a gzip bomb, not a file)")
    if not unpacker.eof:
        raise zlib.error("the gzip stream is truncated")
    return out


def _decode(content: Any, encoding: Any, where: str) -> bytes:
    if not isinstance(content, str) or not isinstance(encoding, str):
        raise BootstrapDataError(f"cloud-config {where}: content and encoding must be text")
    encoding = encoding.strip().lower()
    try:
        if encoding in _PLAIN:
            return content.encode()
        # Whitespace is allowed (wrapped base64), anything else outside the alphabet not.
        if encoding in _B64:
            return base64.b64decode("".join(content.split()), validate=True)
        if encoding in _GZ_B64:
            return _gunzip(base64.b64decode("".join(content.split()), validate=True), where)
        if encoding in _GZ:
            return _gunzip(content.encode("latin-1"), where)
    except (binascii.Error, zlib.error, UnicodeEncodeError) as err:
        raise BootstrapDataError(
            f"cloud-config {where}: content does not decode as {encoding}: "
            f"{shown(str(err), 120)}") from None
    raise BootstrapDataError(f"cloud-config {where}: unknown encoding {encoding!r}",
                             hint="use b64, gz+b64 or plain text")


def _mode(value: Any, where: str) -> int:
    text = str(value) if not isinstance(value, int) else oct(value)
    try:
        mode = int(text, 8)
    except ValueError:
        mode = -1
    if not 0 <= mode <= 0o7777:
        raise BootstrapDataError(f"cloud-config {where}.permissions: {value!r} is not an "
                                 "octal mode such as '0640'")
    return mode


def _owner(value: Any, where: str) -> tuple[str, str]:
    user, _, group = str(value).partition(":")
    for name in (user, group or user):
        if not re.match(r"^[a-z_][a-z0-9_-]*\$?$", name):
            raise BootstrapDataError(f"cloud-config {where}.owner: {value!r} is not user:group")
    return user, group or user


def _step(entry: Any, index: int) -> Step:
    where = f"runcmd[{index}]"
    if isinstance(entry, list) and entry and all(isinstance(a, str) for a in entry):
        argv = tuple(entry)
        shown = shlex.join(argv)
        if _is_kubeadm_join(argv):
            return _kubeadm_join(argv, None, shown, where)
        return Command(argv, secret_summary(argv[0], argv[1:]), shown)
    if not isinstance(entry, str) or not entry.strip():
        raise BootstrapDataError(f"cloud-config {where} is neither a string nor a list of "
                                 "strings")
    return shell_step(entry, where)


def shell_step(entry: str, where: str) -> Step:
    """One shell command line: the managed kubeadm step when it runs `kubeadm join|init`
    (optionally `&& echo success > SENTINEL`), else run through `sh -c`."""
    if re.search(r"\bkubeadm\s+(?:join|init)\b", entry):
        first, _, rest = entry.partition("&&")
        try:
            argv = tuple(shlex.split(first))
        except ValueError as err:
            raise BootstrapDataError(f"cloud-config {where}: {err}") from err
        if not _is_kubeadm_join(argv):
            raise BootstrapDataError(
                f"cloud-config {where} runs kubeadm join or init inside other shell "
                "commands", hint="put `kubeadm join|init --config FILE` in an entry of its own")
        return _kubeadm_join(argv, rest.strip() or None, entry.strip(), where)
    return Command(("sh", "-c", entry), secret_summary("sh -c", [entry]), entry.strip())


def secret_summary(program: str, rest: list[str] | tuple[str, ...]) -> str:
    """A command as it may be shown anywhere: its program, and of its arguments (or
    `sh -c`'s script) only the size and digest: enough to tell two apart, nothing to read."""
    import hashlib

    blob = "\0".join(rest).encode()
    digest = hashlib.sha256(blob).hexdigest()[:12]
    if program == "sh -c":
        what = "script"
    else:
        program = program.rsplit("/", 1)[-1]
        what = f"{len(rest)} argument{'s' if len(rest) != 1 else ''}"
    return f"{program} <{what}: {len(blob)} bytes, sha256:{digest}>"


def _is_kubeadm_join(argv: tuple[str, ...]) -> bool:
    return (len(argv) >= 2 and argv[0].rsplit("/", 1)[-1] == "kubeadm"
            and argv[1] in ("join", "init"))


def _kubeadm_join(argv: tuple[str, ...], after: str | None, shown: str,
                  where: str) -> KubeadmJoin:
    if after is not None and " ".join(after.split()) != _SENTINEL_COMMAND:
        raise BootstrapDataError(f"cloud-config {where}: after kubeadm join it runs "
                                 f"{after!r}; only the CABPK sentinel is understood",
                                 hint="move other commands to entries of their own")
    config: str | None = None
    ignored: list[str] = []
    args = list(argv[2:])
    while args:
        arg = args.pop(0)
        name, eq, value = arg.partition("=")
        if name in ("--config", "--ignore-preflight-errors", "--v", "-v") and not eq:
            if not args:
                raise BootstrapDataError(f"cloud-config {where}: {name} needs a value")
            value = args.pop(0)
        if name == "--config":
            config = value
        elif name == "--ignore-preflight-errors":
            ignored.extend(v for v in value.split(",") if v)
        elif name not in ("--v", "-v"):
            raise BootstrapDataError(
                f"cloud-config {where}: kubeadm {argv[1]} option {name!r} is not supported "
                "by the managed join", hint="put the settings in the JoinConfiguration file")
    if config is None or checks.absolute_path(config):
        raise BootstrapDataError(f"cloud-config {where}: kubeadm {argv[1]} needs "
                                 "--config with an absolute path")
    for check_name in ignored:
        if problem := checks.preflight_check_name(check_name):
            raise BootstrapDataError(f"cloud-config {where}: {problem}")
    return KubeadmJoin(config, tuple(ignored), after is not None, shown, argv[1])
