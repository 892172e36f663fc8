"""The kubelet's flags kept in place on a joined node (pure).

kubeadm writes the kubelet's flags into one line of /var/lib/kubelet/kubeadm-flags.env,
`KUBELET_KUBEADM_ARGS="--name=value ..."`, sorted by name, its own flags and
nodeRegistration.kubeletExtraArgs (which win); the kubelet unit reads it at every start
(cmd/kubeadm/app/phases/kubelet/flags.go, WriteKubeletDynamicEnvFile). On a joined node
the agent keeps spec.join.nodeRegistration.kubeletExtraArgs there: a flag it sets
remembers the value it replaced (journaled), so a flag no longer asked for gets that
value back, or goes when there was none: a change rolled back leaves the line as kubeadm
wrote it.
"""

from __future__ import annotations

import re

from agent.config import checks
from agent.errors import PermanentError, Reason
from agent.recordtype import record

FLAGS_FILE = "/var/lib/kubelet/kubeadm-flags.env"
AT_REGISTRATION = frozenset({"node-labels", "register-with-taints", "register-node",
                             "register-schedulable", "hostname-override"})
"""Flags a kubelet acts on only when it registers its Node (or that rename it): set on a
running node they would change nothing, or the Node's identity. Never changed in place:
the join that registered the Node set them."""
_LINE = re.compile(r'KUBELET_KUBEADM_ARGS="([^"\\\n]*)"\n?')
_FLAG = re.compile(r"--([a-z0-9][a-z0-9-]*)=(\S*)")


@record(frozen=True)
class KeptFlag:
    """A flag the agent set in place: its value, and the one it replaced (None: the
    flag was not there)."""

    value: str
    was: str | None = None


def parse(text: str) -> dict[str, str]:
    """The flags of kubeadm-flags.env, by name; refused when the file is not the one line
    kubeadm writes (the agent never rewrites what it cannot read back)."""
    found = _LINE.fullmatch(text)
    if found is None:
        raise PermanentError(
            f"{FLAGS_FILE} is not the one line kubeadm writes (KUBELET_KUBEADM_ARGS="
            "\"--name=value ...\"): the agent does not change the kubelet's flags there",
            reason=Reason.KubeletNotHealthy,
            hint="let kubeadm write it (kubeadm join), or change the kubelet's flags by a "
                 "rollout")
    flags: dict[str, str] = {}
    for word in found.group(1).split():
        flag = _FLAG.fullmatch(word)
        if flag is None:
            raise PermanentError(f"{FLAGS_FILE}: {word[:80]!r} is not a --name=value flag",
                                 reason=Reason.KubeletNotHealthy,
                                 hint="let kubeadm write the file, or roll the Machine out")
        flags[flag.group(1)] = flag.group(2)
    return flags


def render(flags: dict[str, str]) -> str:
    """The file as kubeadm writes it (sorted by name); each value checked again here,
    whatever checked it before: one word, no quote, no line separator."""
    if problem := checks.kubelet_args(flags):
        raise PermanentError(f"kubelet flags: {problem}", reason=Reason.ConfigInvalid)
    line = " ".join(f"--{name}={value}" for name, value in sorted(flags.items()))
    return f'KUBELET_KUBEADM_ARGS="{line}"\n'


def keep(current: dict[str, str], kept: dict[str, KeptFlag],
         desired: dict[str, str]) -> tuple[dict[str, str], dict[str, KeptFlag]]:
    """The flags with `desired` in force (but those AT_REGISTRATION), and what is then
    kept: flags kept before but no longer desired get back the value they replaced."""
    desired = {name: value for name, value in desired.items() if name not in AT_REGISTRATION}
    flags = dict(current)
    now: dict[str, KeptFlag] = {}
    for name, flag in kept.items():
        if name in desired:
            now[name] = KeptFlag(desired[name], flag.was)
        elif flag.was is None:
            flags.pop(name, None)
        else:
            flags[name] = flag.was
    for name, value in desired.items():
        now.setdefault(name, KeptFlag(value, current.get(name)))
        flags[name] = value
    return flags, now
