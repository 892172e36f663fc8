"""The real tools on the agent's output: a "site" is a node namespace whose NICs are veths
(their peers, with the gateways, in a router namespace, so every NIC has carrier), made the
same way for every path; the agent applies a `spec.network` live into one site through
its command line, real systemd-networkd (in a private mount namespace: its own
/etc/systemd/network, /run/systemd and a read-only /sys, the host untouched) applies the
agent's networkd files or `netplan generate`'s output of its netplan file into another,
and `kernel_state` reads what each produced with `ip -j`, independent of the agent.
Names are unique; namespaces and daemons go away afterwards, even when a test fails."""

from __future__ import annotations

import contextlib
import ipaddress
import json
import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from agent.config.netconfig_v2 import translate

NETWORKD = "/lib/systemd/systemd-networkd"
AGENT = Path(sys.executable).with_name("machine-agent")
FAST = {"arpProbes": 1, "arpInterval": "100ms", "arpWait": "200ms", "dadTimeout": "5s"}
"""Conflict detection shortened for tests (the defaults follow RFC 5227: ~5s)."""
SETTLE = 30.0
"""Seconds networkd may take to configure every link before the test fails."""
WARNING = 4
"""syslog priority of a warning: networkd's lines at this priority or more urgent are
diagnostics about the files (unknown keys, refused values, failed links)."""


def ip(*args: str, check: bool = True) -> str:
    return subprocess.run(["ip", *args], check=check, capture_output=True, text=True,
                          timeout=30).stdout


def interfaces(doc: dict[str, Any]) -> list[dict[str, Any]]:
    """The `spec.network` interface entries of `doc`; those of its network-config v2
    document (`networkConfig`) as the agent reads them, for the site's NICs and kinds."""
    if "networkConfig" in doc:
        return translate(doc["networkConfig"]).interfaces
    entries: list[dict[str, Any]] = doc.get("interfaces", [])
    return entries


def nic_mac(doc: dict[str, Any], index: int, entry: dict[str, Any]) -> str:
    """The NIC's MAC: the one the entry matches, else a fixed local one (the same in every
    site, so link-local addresses agree too)."""
    match = entry.get("match") or {}
    if "macAddress" in match:
        return str(match["macAddress"]).lower()
    return f"02:00:5e:00:53:{index + 1:02x}"


def _physical(doc: dict[str, Any], name: str) -> str | None:
    """The NIC under `name` (itself, its first member, or its parent's NIC)."""
    entry = next(e for e in interfaces(doc) if e["name"] == name)
    kind = entry.get("type", "ethernet")
    if kind == "ethernet":
        return name
    if kind in ("bridge", "bond"):
        members = entry[kind].get("members", [])
        return _physical(doc, members[0]) if members else None
    return _physical(doc, entry[kind]["parent"])


@dataclass
class Site:
    """A node namespace with the config's NICs as veths, and their router namespace."""

    node: str
    router: str
    nics: list[str] = field(default_factory=list)

    def node_ip(self, *args: str) -> str:
        return ip("-n", self.node, *args)


@contextmanager
def site(doc: dict[str, Any]) -> Iterator[Site]:
    tag = uuid.uuid4().hex[:8]
    s = Site(f"ma-proof-{tag}", f"ma-prtr-{tag}")
    ip("netns", "add", s.node)
    try:
        ip("netns", "add", s.router)
        ip("-n", s.router, "link", "set", "lo", "up")
        ip("-n", s.node, "link", "set", "lo", "up")
        peers: dict[str, str] = {}
        for i, entry in enumerate(interfaces(doc)):
            if entry.get("type", "ethernet") != "ethernet":
                continue
            peer = f"p{i}"
            ip("-n", s.node, "link", "add", entry["name"], "address", nic_mac(doc, i, entry),
               "type", "veth", "peer", "name", peer, "netns", s.router)
            ip("-n", s.router, "link", "set", peer, "up")
            peers[entry["name"]] = peer
            s.nics.append(entry["name"])
        for entry in interfaces(doc):  # every gateway answers where the agent checks it
            nic = _physical(doc, entry["name"])
            hops = [entry.get("gateway"), entry.get("gateway6"),
                    *(r.get("via") for r in entry.get("routes", []) if r["to"] == "default")]
            for hop in hops:
                if hop is None or nic is None:
                    continue
                gw = ipaddress.ip_address(hop)
                nets = [ipaddress.ip_interface(a["static"]).network
                        for a in entry.get("addresses", []) if "static" in a]
                prefix = next((n.prefixlen for n in nets if gw in n),
                              24 if gw.version == 4 else 64)
                ip("-n", s.router, "addr", "add", f"{gw}/{prefix}", "dev", peers[nic],
                   *(["nodad"] if gw.version == 6 else []))
        yield s
    finally:
        for name in (s.node, s.router):
            subprocess.run(["ip", "netns", "del", name], check=False, capture_output=True,
                           timeout=30)


# -- the agent ---------------------------------------------------------------------------

def agent_config(doc: dict[str, Any], renderer: str) -> dict[str, Any]:
    network = {**doc, "renderer": renderer, "conflictDetection": FAST,
               "verify": {"timeout": "5s"}}
    return {"apiVersion": "machine-agent.io/v1alpha1", "kind": "AgentConfig",
            "spec": {"network": network}}


def on_veths(doc: dict[str, Any]) -> dict[str, Any]:
    """`doc` with every NIC found by its name (the veth a site made for it) instead of by
    MAC or driver: a veth has no permanent MAC (the kernel reports zeros, and the agent
    matches the permanent one, as networkd's PermanentMACAddress= does) and its driver is
    veth. The live apply runs on this; the files compared with it are rendered from `doc`
    itself. Matching by permanent MAC is proved on virtio NICs by the qemu boot tests."""
    if not any("match" in e for e in interfaces(doc)):
        return doc

    def nic(entry: dict[str, Any]) -> dict[str, Any]:
        if "match" not in entry:
            return entry
        return {**entry, "match": {"name": entry["name"]}}
    return {k: v for k, v in doc.items() if k != "networkConfig"} | {
        "interfaces": [nic(e) for e in interfaces(doc)]}


def agent_run(root: Path, doc: dict[str, Any], renderer: str,
              netns: str | None = None) -> subprocess.CompletedProcess[str]:
    """`machine-agent [--netns NS] --root ROOT run --only network`, as an operator runs
    it: live into `netns` (and the files under ROOT), or the files alone."""
    root.mkdir(parents=True, exist_ok=True)
    if netns is not None and Path("/etc/machine-id").exists():
        # networkd in a site reads the host's machine ID (its bridges' MACs come from it):
        # the live apply is given the same one (read, never written on the host)
        (root / "etc").mkdir(exist_ok=True)
        (root / "etc/machine-id").write_text(Path("/etc/machine-id").read_text())
    cfg = root.parent / f"{root.name}-config.yaml"
    cfg.write_text(yaml.safe_dump(agent_config(doc, renderer)))
    argv = [str(AGENT), "--root", str(root), *(["--netns", netns] if netns else []),
            "run", "--only", "network", "-c", str(cfg)]
    return subprocess.run(argv, capture_output=True, text=True, timeout=120, check=False)


def netplan_generate(root: Path) -> Path:
    """`netplan generate --root-dir ROOT` of the netplan files under ROOT; the directory
    of the networkd files it wrote. Anything it says on stderr fails the test."""
    proc = subprocess.run(["netplan", "generate", "--root-dir", str(root)],
                          capture_output=True, text=True, timeout=60, check=False)
    assert proc.returncode == 0 and not proc.stderr.strip(), (
        f"netplan generate: exit {proc.returncode}\n{proc.stderr}")
    return root / "run/systemd/network"


# -- systemd-networkd -------------------------------------------------------------------

@dataclass
class NetworkdRun:
    log: list[tuple[int, str]]
    """(syslog priority, message) of each line networkd logged."""

    @property
    def diagnostics(self) -> list[str]:
        return [msg for prio, msg in self.log if prio <= WARNING]


def _veth_mac_match(text: str) -> str:
    """A veth has no permanent MAC address (the kernel reports zeros), so a file matching
    a NIC's permanent MAC is given networkd matching the same MAC as the link's current
    one, which on a NIC is the same. Nothing else in the files is changed; the qemu boot
    test matches real virtio NICs by their permanent MAC."""
    return re.sub(r"^PermanentMACAddress=", "MACAddress=", text, flags=re.M)


def _mount_script(etc_dir: Path, run_dir: Path, empty: Path) -> str:
    q = shlex.quote
    binds = [f"mount --bind {q(str(run_dir))} /run/systemd",
             f"mount --bind {q(str(etc_dir))} /etc/systemd/network"]
    if os.path.isdir("/run/dbus"):  # never the host's system bus
        binds.append(f"mount --bind {q(str(empty))} /run/dbus")
    # read-only /sys: networkd then does not wait for udev (none runs in this namespace)
    binds.append("mount -o remount,bind,ro /sys")
    return " && ".join(binds) + f" && exec {NETWORKD}"


def _link_states(s: Site, run_dir: Path) -> dict[str, str]:
    states = {}
    for link in json.loads(s.node_ip("-j", "link", "show")):
        state_file = run_dir / "netif/links" / str(link["ifindex"])
        text = state_file.read_text() if state_file.exists() else ""
        m = re.search(r"^ADMIN_STATE=(\S+)", text, re.M)
        states[link["ifname"]] = m.group(1) if m else "pending"
    return states


def _settled(s: Site, states: dict[str, str], wanted: dict[str, bool]) -> bool:
    """Every wanted link configured (DHCP ones at least configuring: no server answers
    here) and no IPv6 address still tentative."""
    for name, dhcp in wanted.items():
        state = states.get(name)
        if state != "configured" and not (dhcp and state == "configuring"):
            return False
    return "tentative" not in s.node_ip("-6", "addr", "show")


@contextmanager
def networkd(s: Site, work: Path, wanted: dict[str, bool], *, etc_files: Path | None = None,
             run_files: Path | None = None) -> Iterator[NetworkdRun]:
    """Real systemd-networkd in site `s` with `etc_files` as /etc/systemd/network and
    `run_files` as /run/systemd/network, until every link in `wanted` (name: uses DHCP)
    is configured (bounded by SETTLE); killed, with its process group, on leaving."""
    run_dir, empty = work / "run-systemd", work / "empty"
    for d in (run_dir / "netif", run_dir / "network", empty, work / "etc-network"):
        d.mkdir(parents=True, exist_ok=True)
    shutil.chown(run_dir / "netif", "systemd-network", "systemd-network")
    etc_dir = work / "etc-network"
    for given, into in ((run_files, run_dir / "network"), (etc_files, etc_dir)):
        for f in sorted(given.iterdir()) if given is not None else ():
            (into / f.name).write_text(_veth_mac_match(f.read_text()))
    log_path = work / "networkd.log"
    env = {"PATH": os.environ.get("PATH", "/usr/sbin:/usr/bin:/sbin:/bin"),
           "SYSTEMD_LOG_TARGET": "console-prefixed", "SYSTEMD_LOG_LEVEL": "info",
           "SYSTEMD_LOG_COLOR": "0"}
    with log_path.open("w") as out:
        proc = subprocess.Popen(
            ["ip", "netns", "exec", s.node, "unshare", "--mount", "--propagation", "private",
             "sh", "-ec", _mount_script(etc_dir, run_dir, empty)],
            stdout=out, stderr=subprocess.STDOUT, env=env, start_new_session=True)
    try:
        deadline = time.monotonic() + SETTLE
        states: dict[str, str] = {}
        while time.monotonic() < deadline:
            states = _link_states(s, run_dir)
            if proc.poll() is not None or "failed" in {states.get(n) for n in wanted}:
                break
            if _settled(s, states, wanted):
                break
            time.sleep(0.2)
        log = _read_log(log_path)
        assert proc.poll() is None, f"networkd exited {proc.returncode}:\n{log_path.read_text()}"
        assert _settled(s, states, wanted), (
            f"networkd did not configure {wanted} within {SETTLE:g}s: {states} "
            f"{[(f.name, f.read_text()) for f in (run_dir / 'netif/links').iterdir()]}\n"
            + log_path.read_text())
        yield NetworkdRun(log)
    finally:
        _stop(proc)


def _read_log(path: Path) -> list[tuple[int, str]]:
    lines = []
    for line in path.read_text(errors="replace").splitlines():
        m = re.match(r"<(\d+)>(.*)", line)  # facility * 8 + priority, as syslog
        lines.append((int(m.group(1)) & 7, m.group(2)) if m else (3, line))  # unprefixed: urgent
    return lines


def _stop(proc: subprocess.Popen[bytes]) -> None:
    """networkd and anything in its process group (it spawns nothing, but a hung mount
    would be a child): TERM, then KILL."""
    for sig, wait in ((signal.SIGTERM, 5.0), (signal.SIGKILL, 5.0)):
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            break
        try:
            proc.wait(timeout=wait)
            break
        except subprocess.TimeoutExpired:
            continue
    with contextlib.suppress(ProcessLookupError):  # a member that outlived its leader
        os.killpg(proc.pid, signal.SIGKILL)


# -- the kernel's state ---------------------------------------------------------------

STATE_COMMANDS = {"link": ("-j", "-d", "link", "show"), "addr": ("-j", "addr", "show"),
                  "route4": ("-4", "-j", "route", "show", "table", "all"),
                  "route6": ("-6", "-j", "route", "show", "table", "all")}
"""The `ip` commands kernel_state reads (the qemu boot test runs them in its guest)."""


def kernel_state(s: Site) -> dict[str, Any]:
    return state_of({key: s.node_ip(*argv) for key, argv in STATE_COMMANDS.items()}, s.nics)


def state_of(shown: dict[str, str], nics: list[str]) -> dict[str, Any]:
    """Links, MTUs, masters, addresses, routes (every table but the kernel's local one,
    with metrics) from what the STATE_COMMANDS printed. MACs only for the NICs `nics`
    and bridges (another created link's MAC is the kernel's choice) and IPv6 link-local
    addresses only as present or not (they follow the MAC)."""
    links: dict[str, Any] = {}
    link_local: set[str] = set()
    for link in json.loads(shown["link"]):
        name = link["ifname"]
        if name == "lo":
            continue
        info = link.get("linkinfo", {})
        kind = info.get("info_kind")
        data = info.get("info_data", {})
        entry: dict[str, Any] = {"kind": kind, "mtu": link["mtu"],
                                 "up": "UP" in link.get("flags", []),
                                 "master": link.get("master")}
        if name in nics or kind == "bridge":  # networkd's generated MAC, on every path
            entry["mac"] = link["address"]
        if kind == "bridge":
            entry["stp_state"] = data.get("stp_state")
        if kind in ("macvlan", "vlan", "bond"):
            entry["mode"] = data.get("mode", data.get("id"))
            entry["parent"] = link.get("link")
        links[name] = entry
    addresses = []
    for link in json.loads(shown["addr"]):
        for a in link.get("addr_info", []):
            if a["family"] == "inet6" and a.get("scope") == "link":
                link_local.add(link["ifname"])
            elif link["ifname"] != "lo":
                addresses.append((link["ifname"], f"{a['local']}/{a['prefixlen']}",
                                  a.get("broadcast"), a.get("scope")))
    routes = []
    for family in ("route4", "route6"):
        for r in json.loads(shown[family]):
            if r.get("table") == "local" or r.get("type") == "multicast" or \
                    r.get("dst", "").startswith("fe80::"):
                continue
            routes.append(json.dumps(
                {k: r.get(k) for k in ("dst", "gateway", "dev", "table", "metric",
                                       "protocol", "scope", "prefsrc", "type")},
                sort_keys=True))
    for name, entry in links.items():
        entry["ipv6_link_local"] = name in link_local
    return {"links": links, "addresses": sorted(addresses, key=str), "routes": sorted(routes)}


def accept_ra(s: Site) -> dict[str, str]:
    """net.ipv6.conf.LINK.accept_ra of every link but lo, read inside the namespace."""
    out = subprocess.run(["ip", "netns", "exec", s.node, "grep", "-r", ".",
                          "--include=accept_ra", "/proc/sys/net/ipv6/conf"],
                         capture_output=True, text=True, timeout=30, check=True).stdout
    values = {}
    for line in out.splitlines():
        path, _, value = line.partition(":")
        name = path.split("/")[-2]
        if name not in ("all", "default", "lo"):
            values[name] = value
    return values


def differences(want: dict[str, Any], got: dict[str, Any], path: str = "") -> list[str]:
    """Where two kernel states differ, one line each (`links.eth0.mtu: 1500 != 9000`),
    so a failing comparison says what a user would see differ."""
    if isinstance(want, dict) and isinstance(got, dict):
        return [line for key in sorted(set(want) | set(got), key=str)
                for line in differences(want.get(key, "<absent>"), got.get(key, "<absent>"),
                                        f"{path}.{key}" if path else str(key))]
    if isinstance(want, list) and isinstance(got, list) and want != got:
        return [f"{path}: only in the first: {x}" for x in want if x not in got] + \
               [f"{path}: only in the second: {x}" for x in got if x not in want]
    return [] if want == got else [f"{path}: {want!r} != {got!r}"]
