"""IPv4 addresses are added live with the subnet's broadcast address, as networkd adds
them (and `ip addr add ... brd +`): without IFA_BROADCAST the kernel keeps none, and a
live node answered nothing sent to its subnet's broadcast until networkd took over after
a reboot. test_real_networkd compares the kernel's addresses on every path."""

from __future__ import annotations

import pytest

from agent.netlink.observe import IFA_BROADCAST, IFA_LOCAL
from agent.netlink.rtnl import IFADDRMSG, RTM_DELADDR, RTM_NEWADDR, attributes
from agent.phases.network.apply import Executor, _addr_op


def encoded(what: str, iface: str) -> tuple[int, dict[int, bytes]]:
    executor = Executor.__new__(Executor)  # encoding needs only the link's index
    executor.index = {"eth0": 2}
    request = executor.request(_addr_op(what, "eth0", iface))  # type: ignore[arg-type]
    found = attributes(request.body, IFADDRMSG.size, len(request.body))
    return request.kind, {kind: bytes(value) for kind, value in found.items()}


@pytest.mark.parametrize(("iface", "broadcast"), [
    ("192.0.2.10/24", "192.0.2.255"), ("198.51.100.70/26", "198.51.100.127"),
    ("203.0.113.1/30", "203.0.113.3")])
def test_an_ipv4_address_is_added_with_its_subnets_broadcast(iface: str,
                                                             broadcast: str) -> None:
    kind, found = encoded("addr-add", iface)
    assert kind == RTM_NEWADDR
    assert found[IFA_BROADCAST] == bytes(int(b) for b in broadcast.split("."))
    assert found[IFA_LOCAL] == bytes(int(b) for b in iface.split("/")[0].split("."))


@pytest.mark.parametrize(("what", "iface"), [
    ("addr-add", "192.0.2.10/31"), ("addr-add", "192.0.2.10/32"),  # no broadcast there
    ("addr-add", "2001:db8::10/64"), ("addr-del", "192.0.2.10/24")])
def test_no_broadcast_where_there_is_none_or_nothing_is_added(what: str, iface: str) -> None:
    kind, found = encoded(what, iface)
    assert kind == (RTM_NEWADDR if what == "addr-add" else RTM_DELADDR)
    assert IFA_BROADCAST not in found
