"""Proving a conflist with the real plugins, as a container runtime would.

A throwaway network namespace stands for a pod. Each plugin of the list is executed with
the CNI environment (CNI_COMMAND, CNI_CONTAINERID, CNI_NETNS, CNI_IFNAME, CNI_PATH) and
its network configuration on stdin, as libcni does (containernetworking/cni
libcni/api.go: buildOneConfig injects `name`, `cniVersion` and `prevResult`; ADD chains
each plugin's result into the next; CHECK and DEL get the list's ADD result; DEL runs the
plugins in reverse; CHECK needs cniVersion 0.4.0 or later). host-local's dataDir is
pointed at a private directory, so the check never takes an address from the real pool.

The plugins run in the node's namespace (`Host.netns`, through `ip netns exec`, or the
agent's own): that is where the bridge plugin creates its bridge, as with a runtime. A
bridge the check created is removed again when the check fails or is killed before the
plugin set the bridge's own MAC: once its last port is gone the kernel gives such a bridge
the all-zero MAC, and every later ADD fails on it ("could not set bridge's mac").
"""

from __future__ import annotations

import contextlib
import copy
import ipaddress
import json
import logging
import re
import secrets
from typing import Any

from agent.config.cni import CheckSpec
from agent.errors import PermanentError, Reason
from agent.host import Host
from agent.netlink.observe import LinkState, links
from agent.netlink.rtnl import connect
from agent.phases.cni.conflist import IPRange, own_links
from agent.phases.cni.result import Proof
from agent.recordtype import record

log = logging.getLogger(__name__)

IFNAME = "eth0"
PREFIX = "ma-cni-check-"
"""Name of a check's subdirectory of dataDir (and of its namespace), before its token."""
MARKER = ".machine-agent-cni-check"
"""File in a check's subdirectory saying the agent made it (host-local keeps its own
files under a subdirectory named after the network, never at this level)."""
_OWN = re.compile(re.escape(PREFIX) + r"[0-9a-f]{8}")
_GONE = re.compile(r"\." + re.escape(PREFIX) + r"[0-9a-f]{8}\.gone")
"""A finished check's subdirectory, renamed before its removal: removing a tree takes
the marker early, so a kill midway would otherwise leave an unmarked directory that is
not the agent's to touch; a name of this form says it is, with nothing else to undo."""
BRIDGE = "bridge "
"""Marker line naming a bridge the check was about to create (absent before it)."""
_IFNAME = re.compile(r"[A-Za-z0-9_.-]{1,15}")


class CNIBrokenError(PermanentError):
    """A plugin failed the check; the message carries its own error JSON."""

    reason = Reason.CNIBroken


@record(frozen=True)
class Sandbox:
    """The throwaway pod: its namespace, container id and host-local data directory."""

    netns: str
    container_id: str
    data_dir: str
    """System path (under the Host's root)."""


def prove(host: Host, doc: dict[str, Any], bin_dir: str, spec: CheckSpec,
          ranges: list[IPRange]) -> Proof:
    """Run ADD, CHECK and DEL of the list against a throwaway namespace; the pod's address
    must come from one of `ranges` (when the list has host-local ranges)."""
    for name in host.list_dir(spec.data_dir):
        if _GONE.fullmatch(name) and host.is_real_dir(f"{spec.data_dir}/{name}"):
            host.remove_tree(f"{spec.data_dir}/{name}")
    for left, bridges in _leftovers(host, spec):
        _clean_up(host, doc, bin_dir, _sandbox(spec, left), spec, bridges)
    box = _sandbox(spec, secrets.token_hex(4))
    if host.exists(box.data_dir):  # not the agent's (its own were just cleaned up)
        raise CNIBrokenError(f"{box.data_dir} already exists and is not the agent's",
                             hint="remove it or set spec.cni.check.dataDir to a directory "
                                  "of the agent's own")
    # The data directory is made first, with its marker in one step: it is the record a
    # killed check leaves, so the next check finds its namespace and pod and removes them
    # (as a runtime's restart sends DEL for sandboxes it no longer knows), and the bridges
    # the check is about to create.
    made = sorted(own_links(doc) - {link.name for link in _links(host)})
    host.write_file(f"{box.data_dir}/{MARKER}",
                    f"{box.netns}\n" + "".join(f"{BRIDGE}{name}\n" for name in made))
    conf = _with_data_dir(doc, str(host.path(box.data_dir)))
    host.run(["ip", "netns", "add", box.netns])
    commands: list[str] = []
    added: dict[str, Any] | None = None
    cached = _version(conf) >= (0, 4, 0)
    proved = False
    try:
        try:
            added = _add(host, conf, bin_dir, box, spec)
            commands.append("ADD")
            address = _pod_address(host, box, added, ranges)
            if cached:
                for plugin in conf["plugins"]:
                    _call(host, "CHECK", _one(conf, plugin, added), bin_dir, box, spec)
                commands.append("CHECK")
        except Exception:
            # Clean up as a runtime would after a failed ADD; the first error is the story.
            _delete(host, conf, added if cached else None, bin_dir, box, spec, strict=False)
            raise
        _delete(host, conf, added if cached else None, bin_dir, box, spec, strict=True)
        commands.append("DEL")
        proved = True
    finally:
        host.run(["ip", "netns", "delete", box.netns], check=False)
        if not proved:
            _remove_bridges(host, made)
        _discard(host, spec, box)
    return Proof(commands, address, box.netns)


def _leftovers(host: Host, spec: CheckSpec) -> list[tuple[str, list[str]]]:
    """Tokens of the checks a killed run left in dataDir, with the bridges each was about
    to create: directories (not links) named as the agent names them whose marker names
    them back. Anything else there is not the agent's to touch."""
    found = []
    for name in host.list_dir(spec.data_dir):
        entry = f"{spec.data_dir}/{name}"
        if not _OWN.fullmatch(name) or not host.is_real_dir(entry):
            continue
        with contextlib.suppress(OSError, UnicodeDecodeError):
            text = host.read_text(f"{entry}/{MARKER}", limit=4096) or ""
            first, *rest = text.splitlines() or [""]
            if first.strip() == name:
                bridges = [line[len(BRIDGE):] for line in rest if line.startswith(BRIDGE)
                           and _IFNAME.fullmatch(line[len(BRIDGE):])]
                found.append((name[len(PREFIX):], bridges))
    return found


def _sandbox(spec: CheckSpec, token: str) -> Sandbox:
    return Sandbox(f"{PREFIX}{token}", f"machine-agent-check-{token}",
                   f"{spec.data_dir}/{PREFIX}{token}")


def _clean_up(host: Host, doc: dict[str, Any], bin_dir: str, box: Sandbox,
              spec: CheckSpec, bridges: list[str]) -> None:
    """Undo what a check killed midway left: its pod (DEL, no prevResult: the ADD result
    died with it), its namespace, the bridges it created, its host-local data."""
    conf = _with_data_dir(doc, str(host.path(box.data_dir)))
    _delete(host, conf, None, bin_dir, box, spec, strict=False)
    host.run(["ip", "netns", "delete", box.netns], check=False)
    _remove_bridges(host, bridges)
    _discard(host, spec, box)


def _discard(host: Host, spec: CheckSpec, box: Sandbox) -> None:
    """Remove a check's data directory once nothing else of it is left: renamed first,
    in one step, to the name that says so (`_GONE`)."""
    gone = f"{spec.data_dir}/.{box.netns}.gone"
    host.rename(box.data_dir, gone)
    host.remove_tree(gone)


def _links(host: Host) -> tuple[LinkState, ...]:
    """The links of the namespace the plugins run in."""
    with contextlib.closing(connect(host)) as rtnl:
        return links(rtnl)


def _remove_bridges(host: Host, names: list[str]) -> None:
    """Delete those of `names` that are bridges without a port: what the check created
    and nothing uses (a pod the kubelet attached meanwhile keeps its bridge)."""
    if not names:
        return
    now = _links(host)
    used = {link.master for link in now if link.master is not None}
    netns = ["-n", host.netns] if host.netns else []
    for link in now:
        if link.name in names and link.kind == "bridge" and link.index not in used:
            log.info("removing bridge %s, which an unfinished CNI check created", link.name)
            host.run(["ip", *netns, "link", "delete", "dev", link.name], check=False)


def _delete(host: Host, conf: dict[str, Any], prev: dict[str, Any] | None, bin_dir: str,
            box: Sandbox, spec: CheckSpec, *, strict: bool) -> None:
    for plugin in reversed(conf["plugins"]):
        try:
            _call(host, "DEL", _one(conf, plugin, prev), bin_dir, box, spec)
        except CNIBrokenError:
            if strict:
                raise


def _with_data_dir(doc: dict[str, Any], data_dir: str) -> dict[str, Any]:
    conf = copy.deepcopy(doc)
    for plugin in conf.get("plugins") or []:
        ipam = plugin.get("ipam")
        if isinstance(ipam, dict) and ipam.get("type") == "host-local":
            ipam["dataDir"] = data_dir
    return conf


def _version(doc: dict[str, Any]) -> tuple[int, ...]:
    return tuple(int(p) for p in str(doc.get("cniVersion", "0.0.0")).split("."))


def _one(conf: dict[str, Any], plugin: dict[str, Any],
         prev: dict[str, Any] | None) -> dict[str, Any]:
    one = {**plugin, "name": conf["name"], "cniVersion": conf["cniVersion"]}
    if prev is not None:
        one["prevResult"] = prev
    return one


def _add(host: Host, conf: dict[str, Any], bin_dir: str, box: Sandbox,
         spec: CheckSpec) -> dict[str, Any]:
    prev: dict[str, Any] | None = None
    for plugin in conf["plugins"]:
        prev = _call(host, "ADD", _one(conf, plugin, prev), bin_dir, box, spec)
    assert prev is not None  # a list has at least one plugin (validated)
    return prev


def _call(host: Host, command: str, net: dict[str, Any], bin_dir: str, box: Sandbox,
          spec: CheckSpec) -> dict[str, Any]:
    plugin = str(host.path(f"{bin_dir}/{net['type']}"))
    argv = [plugin] if host.netns is None else ["ip", "netns", "exec", host.netns, plugin]
    env = {"CNI_COMMAND": command, "CNI_CONTAINERID": box.container_id,
           "CNI_NETNS": f"/var/run/netns/{box.netns}", "CNI_IFNAME": IFNAME,
           "CNI_PATH": str(host.path(bin_dir))}
    result = host.run(argv, input=json.dumps(net), env=env, timeout=float(spec.timeout),
                      check=False)
    if not result.ok:
        error = result.stdout.strip() or result.stderr.strip()
        try:  # the plugin's error JSON (code, msg, details), on one line
            error = json.dumps(json.loads(error))
        except ValueError:
            error = error[-1000:]
        raise CNIBrokenError(
            f"CNI {command} failed in plugin {net['type']!r} (exit {result.returncode}): "
            f"{error}", hint="the plugin's own error is quoted; fix spec.cni.conflist "
                             "(its template values or inline list) or the plugin binaries "
                             "in spec.cni.binDir, or turn the proof off with "
                             "spec.cni.check.enabled: false for a plugin whose daemon does "
                             "not run yet")
    if command != "ADD":
        return {}
    try:
        out: dict[str, Any] = json.loads(result.stdout)
    except ValueError as err:
        raise CNIBrokenError(f"CNI ADD of plugin {net['type']!r} printed no JSON result: "
                             f"{result.stdout[:300]!r}") from err
    return out


def _pod_address(host: Host, box: Sandbox, added: dict[str, Any],
                 ranges: list[IPRange]) -> str:
    """The address ADD reported, checked to be on the pod's interface and in a range."""
    claimed = [ipaddress.ip_interface(ip["address"]) for ip in added.get("ips") or []
               if isinstance(ip, dict) and "address" in ip]
    if not claimed:
        raise CNIBrokenError(f"CNI ADD returned no address: {json.dumps(added)[:500]}")
    shown = host.run(["ip", "-n", box.netns, "-j", "address", "show", "dev", IFNAME],
                     mutates=False, check=False)
    present = {ipaddress.ip_interface(f"{a['local']}/{a['prefixlen']}")
               for link in (json.loads(shown.stdout) if shown.ok and shown.stdout else [])
               for a in link.get("addr_info", [])}
    for addr in claimed:
        if addr not in present:
            raise CNIBrokenError(f"CNI ADD reported {addr} but the pod's {IFNAME} does not "
                                 f"have it (has: {', '.join(map(str, present)) or 'none'})")
        if ranges and not any(r.contains(addr.ip) for r in ranges):
            raise CNIBrokenError(f"the pod got {addr}, outside the configured ranges "
                                 f"{', '.join(str(r.subnet) for r in ranges)}")
    return str(claimed[0])
