"""The kernel command line as a configuration source, for PXE and ISO boots on bare metal
where no cloud-init datasource exists.

Parameters (in /proc/cmdline under the Host root):
- `machine-agent.machine=NAMESPACE/NAME` sets spec.identity.machine;
- `machine-agent.config=PATH` names an AgentConfig file, read under the Host root like
  any other file. It must be there when the agent starts: on a config drive that the
  image mounts (an fstab or .mount unit ordered before machine-agent.service), or copied
  by the initramfs into a directory that survives switch_root (e.g. /run/machine-agent/).

The file is one fragment (origin `kernel command line machine-agent.config=PATH`) and the
machine parameter another above it (origin `kernel command line machine-agent.machine`):
a value written on the command line itself wins over the file it names.

Parsing follows the kernel's (lib/cmdline.c next_arg): words are separated by blanks,
double quotes group blanks into a word and are removed; everything after a lone `--` is
passed to init and is not a kernel parameter. Values are validated strictly: any other
`machine-agent.*` parameter, a parameter given twice with different values, a bad name or
path, is an error naming the kernel command line, so a typo or a hostile boot entry never
turns into a silently different identity.
"""

from __future__ import annotations

from collections.abc import Iterable

from agent.config import checks
from agent.config.fragment import Fragment
from agent.config.model import API_VERSION, KIND
from agent.config.sources.files import FileSource
from agent.errors import FieldError
from agent.host import Host
from agent.recordtype import record

CMDLINE = "/proc/cmdline"
PREFIX = "machine-agent."
MACHINE = "machine-agent.machine"
CONFIG = "machine-agent.config"
ORIGIN = "kernel command line"
MAX_LENGTH = 4096
"""More than any architecture's COMMAND_LINE_SIZE (x86: 2048)."""


def split_cmdline(text: str) -> list[str]:
    """Words as the kernel splits them: blanks separate, double quotes group and are
    dropped (`a="b c"` is `a=b c`); words after a lone `--` belong to init."""
    words: list[str] = []
    current: list[str] = []
    quoted = in_word = False
    for char in text:
        if char == '"':
            quoted = not quoted
            in_word = True
        elif char.isspace() and not quoted:
            if in_word:
                words.append("".join(current))
                current, in_word = [], False
        else:
            current.append(char)
            in_word = True
    if in_word:
        words.append("".join(current))
    return words[:words.index("--")] if "--" in words else words


def agent_parameters(text: str, errors: list[FieldError]) -> dict[str, str]:
    """The `machine-agent.*` parameters; problems (unknown, repeated) go to `errors`."""
    found: dict[str, str] = {}
    for word in split_cmdline(text):
        key, sep, value = word.partition("=")
        if not key.startswith(PREFIX):
            continue
        if key not in (MACHINE, CONFIG):
            errors.append(FieldError(_shown(key), "unknown parameter",
                                     f"the agent reads {MACHINE}= and {CONFIG}=",
                                     origin=f"{ORIGIN} ({CMDLINE})"))
            continue
        if not sep:
            errors.append(FieldError(key, "needs a value", f"write {key}=VALUE",
                                     origin=f"{ORIGIN} ({CMDLINE})"))
            continue
        if key in found and found[key] != value:
            errors.append(FieldError(key, "is given twice with different values",
                                     "give it once", origin=f"{ORIGIN} ({CMDLINE})"))
            continue
        found[key] = value
    return found


def _shown(text: str) -> str:
    return text.encode("unicode_escape").decode()[:80]


def machine_fragment(value: str, errors: list[FieldError]) -> Fragment | None:
    """spec.identity.machine from `NAMESPACE/NAME`, or None (with errors)."""
    origin = f"{ORIGIN} {MACHINE}"
    namespace, _, name = value.partition("/")
    if value.count("/") != 1:
        errors.append(FieldError(MACHINE, f'"{_shown(value)}" is not NAMESPACE/NAME',
                                 f"write e.g. {MACHINE}=default/worker-0", origin=origin))
        return None
    problems = [p for p in (checks.k8s_namespace(namespace), checks.k8s_name(name)) if p]
    for problem in problems:
        errors.append(FieldError(MACHINE, problem, origin=origin))
    if problems:
        return None
    return Fragment(origin, {"apiVersion": API_VERSION, "kind": KIND, "spec": {
        "identity": {"machine": {"namespace": namespace, "name": name}}}})


@record(frozen=True)
class KernelCmdlineSource:
    """The agent's parameters on the kernel command line (module docstring). A missing
    /proc/cmdline (an image tree, a test root) gives nothing."""

    def fragments(self, host: Host, errors: list[FieldError]) -> Iterable[Fragment]:
        try:
            text = host.read_text(CMDLINE)
        except (OSError, UnicodeDecodeError) as err:
            errors.append(FieldError("(file)", f"cannot read: {err}",
                                     origin=f"{ORIGIN} ({CMDLINE})"))
            return []
        if not text:
            return []
        if len(text) > MAX_LENGTH:
            errors.append(FieldError("(file)", f"is {len(text)} characters long, more than "
                                     "any kernel accepts", origin=f"{ORIGIN} ({CMDLINE})"))
            return []
        params = agent_parameters(text, errors)
        out: list[Fragment] = []
        if CONFIG in params:
            out.extend(self._config_file(host, params[CONFIG], errors))
        if MACHINE in params:
            fragment = machine_fragment(params[MACHINE], errors)
            if fragment is not None:
                out.append(fragment)
        return out

    @staticmethod
    def _config_file(host: Host, path: str, errors: list[FieldError]) -> Iterable[Fragment]:
        origin = f"{ORIGIN} {CONFIG}={_shown(path)}"
        problem = checks.absolute_path(path)
        if problem:
            errors.append(FieldError(CONFIG, problem, origin=origin))
            return []
        file_errors: list[FieldError] = []
        fragments = list(FileSource(path, required=True).fragments(host, file_errors))
        # Errors inside the file name it as the kernel command line's file.
        errors.extend(FieldError(e.path, e.message, e.hint, origin=origin)
                      for e in file_errors)
        return [Fragment(origin, f.document) for f in fragments]
