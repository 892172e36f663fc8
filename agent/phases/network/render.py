"""Pure renderers of the persistent network configuration: systemd-networkd or netplan
(chosen by `spec.network.renderer`), DNS, host name, /etc/hosts, and the cloud-init
drop-in. Each returns {system path: content}; values were validated by the config."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from agent.phases.network.model import NetworkPlan
from agent.templating import refuse_separators, render

if TYPE_CHECKING:
    pass

NETWORKD_DIR = "/etc/systemd/network"
NETWORKD_PREFIX = "10-machine-agent-"
NETPLAN_FILE = "/etc/netplan/60-machine-agent.yaml"
RESOLVED_DROPIN = "/etc/systemd/resolved.conf.d/machine-agent.conf"
RESOLV_CONF = "/etc/resolv.conf"
CLOUD_INIT_DROPIN = "/etc/cloud/cloud.cfg.d/99-machine-agent-network.cfg"
HOSTS_BEGIN = "# BEGIN machine-agent (spec.network.hostname)"
HOSTS_END = "# END machine-agent"
NETPLAN_SECTIONS = (("ethernets", "ethernet"), ("bonds", "bond"), ("bridges", "bridge"),
                    ("vlans", "vlan"))


def _render(name: str, **values: Any) -> str:
    return render(f"network/{name}", **values)


def render_networkd(plan: NetworkPlan) -> dict[str, str]:
    """A .network file per link, a .netdev per link the agent creates, and a .link
    per link it renames."""
    files: dict[str, str] = {}
    by_name = {link.name: link for link in plan.links}
    for link in plan.links:
        base = f"{NETWORKD_DIR}/{NETWORKD_PREFIX}{link.name}"
        if link.virtual:
            files[f"{base}.netdev"] = _render("networkd.netdev.j2", link=link)
        if link.rename:
            files[f"{base}.link"] = _render("networkd.link.j2", link=link)
        dhcp = {(True, True): "yes", (True, False): "ipv4",
                (False, True): "ipv6"}.get((link.dhcp4, link.dhcp6))
        files[f"{base}.network"] = _render(
            "networkd.network.j2", link=link, dhcp=dhcp,
            master=by_name[link.master] if link.master else None,
            children=[by_name[c] for c in link.children])
    return files


def render_netplan(plan: NetworkPlan) -> dict[str, str]:
    """One netplan YAML for every link (netplan has no macvlan; validation refuses it)."""
    sections = [(section, links) for section, kind in NETPLAN_SECTIONS
                if (links := [link for link in plan.links if link.kind == kind])]
    members: dict[str, list[str]] = {}
    for link in plan.links:
        if link.master is not None:
            members.setdefault(link.master, []).append(link.name)
    return {NETPLAN_FILE: _render("netplan.yaml.j2", sections=sections, members=members)}


def render_dns(plan: NetworkPlan, backend: str, renderer: str = "networkd"
               ) -> dict[str, str]:
    """Global DNS. A link's own DNS is the link's in systemd-resolved, from the networkd
    or netplan files; where there is no such place (/etc/resolv.conf, or no link files)
    it is added to the global DNS, so it is used at all."""
    per_link = backend == "resolved" and renderer in ("networkd", "netplan")
    servers, search = ((plan.nameservers, plan.search) if per_link else plan.all_dns())
    if not servers and not search:
        return {}
    template, path = (("resolved.conf.j2", RESOLVED_DROPIN) if backend == "resolved"
                      else ("resolv.conf.j2", RESOLV_CONF))
    return {path: _render(template, nameservers=servers, search=search)}


def render_hostname(plan: NetworkPlan, current_hosts: str | None) -> dict[str, str]:
    """/etc/hostname, and the host name's line in /etc/hosts inside a marked block (the
    rest of the file is the administrator's and is kept as it is)."""
    if plan.hostname is None:
        return {}
    name = plan.hostname.rstrip(".")
    short = name.split(".")[0]
    # Debian's convention (hosts(5)): a host without a static address maps to 127.0.1.1.
    address = plan.primary_address or "127.0.1.1"
    for what, value in (("spec.network.hostname", name), ("the host name's address", address)):
        refuse_separators(value, what)  # written without a template
    entry = f"{address}\t{name}" + (f" {short}" if short != name else "")
    kept: list[str] = []
    inside = False
    for line in (current_hosts or "127.0.0.1\tlocalhost\n").splitlines():
        if line == HOSTS_BEGIN:
            inside = True
        elif line == HOSTS_END:
            inside = False
        elif not inside:
            kept.append(line)
    hosts = "\n".join([*kept, HOSTS_BEGIN, entry, HOSTS_END]) + "\n"
    return {"/etc/hostname": name + "\n", "/etc/hosts": hosts}


def render_cloud_init_dropin() -> dict[str, str]:
    return {CLOUD_INIT_DROPIN: _render("cloud-init.cfg.j2")}


def render_links(plan: NetworkPlan, renderer: str) -> dict[str, str]:
    if renderer == "networkd":
        return render_networkd(plan)
    if renderer == "netplan":
        return render_netplan(plan)
    return {}


def link_files_owned(renderer: str, names: list[str]) -> list[str]:
    """Of the files in the renderer's directory, those the agent wrote (for removing the
    ones no interface needs any more)."""
    if renderer != "networkd":
        return []
    return [f"{NETWORKD_DIR}/{n}" for n in names if n.startswith(NETWORKD_PREFIX)]
