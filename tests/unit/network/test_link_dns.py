"""A link's own DNS (v2 nameservers, an IPAM pool's servers) is the link's: networkd and
netplan give it to systemd-resolved for that link, and the global DNS does not hold it;
where DNS can only be global (/etc/resolv.conf, or no link files) it joins the global."""

from __future__ import annotations

from agent.phases.network.model import build_plan
from agent.phases.network.render import RESOLV_CONF, RESOLVED_DROPIN, render_dns
from tests.unit.network.netconfig import network_errors, network_spec

NETWORK = {"dns": {"nameservers": ["192.0.2.53"], "search": ["example.net"]},
           "interfaces": [{"name": "eth0", "addresses": [{"static": "198.51.100.10/24"}],
                           "dns": {"nameservers": ["198.51.100.53"],
                                   "search": ["lab.example.net"]}}]}


def test_with_resolved_the_links_dns_stays_the_links() -> None:
    plan = build_plan(network_spec(NETWORK))
    for renderer in ("networkd", "netplan"):
        dropin = render_dns(plan, "resolved", renderer)[RESOLVED_DROPIN]
        assert "DNS=192.0.2.53\n" in dropin and "Domains=example.net\n" in dropin


def test_where_dns_is_only_global_the_links_dns_joins_it() -> None:
    plan = build_plan(network_spec(NETWORK))
    conf = render_dns(plan, "resolv.conf", "networkd")[RESOLV_CONF]
    assert "nameserver 192.0.2.53\nnameserver 198.51.100.53\n" in conf
    assert "search example.net lab.example.net\n" in conf
    dropin = render_dns(plan, "resolved", "none")[RESOLVED_DROPIN]
    assert "DNS=192.0.2.53 198.51.100.53\n" in dropin


def test_more_than_three_servers_with_the_links_in_resolv_conf_are_refused() -> None:
    network = {"dns": {"backend": "resolv.conf", "nameservers": ["192.0.2.53", "192.0.2.54"]},
               "interfaces": [{"name": "eth0", "dns": {
                   "nameservers": ["198.51.100.53", "198.51.100.54"]}}]}
    assert network_errors(network) == [
        "spec.network.dns.nameservers: 4 servers (with the interfaces' own), but "
        "/etc/resolv.conf holds at most 3 (use backend resolved, or fewer)"]
