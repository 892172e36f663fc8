"""The sandbox's wires: a "router" namespace with two bridges, and one namespace per node
joined to both by veth pairs. Only documentation addresses, only inside these namespaces.

    node ns (one per node)                   router ns
      prov0 198.51.100.1N/24 ── veth ── pN ─ br-prov 198.51.100.1/24  management API :6443
      eth0  (the agent configures it) ─ eN ─ br-data 192.0.2.1/24     the nodes' gateway
                                               lo 203.0.113.10/32      workload API :6443
                                               lo 203.0.113.123/32     NTP server :123

`prov0` is the address the machine booted with (as a DHCP lease on a provisioning
network would give): the agent reaches the management cluster over it before its own
network phase has run. `eth0` is what the agent configures: an address (from the pool,
or static), the default route via the gateway; the workload API and the NTP server are
reached through that gateway only.
"""

from __future__ import annotations

from dataclasses import dataclass

from machine_agent_sandbox.cleanup import Registry

GATEWAY = "192.0.2.1"
DATA_PREFIX = 24
MANAGEMENT_ADDRESS = "198.51.100.1"
MANAGEMENT_PORT = 6443
WORKLOAD_ADDRESS = "203.0.113.10"
WORKLOAD_PORT = 6443
NTP_ADDRESS = "203.0.113.123"
DATA_LINK, PROVISIONING_LINK = "eth0", "prov0"
DATA_MAC, PROV_MAC = "02:00:c0:00:02:01", "02:00:c6:33:64:01"
"""The router's bridges' own addresses (locally administered)."""


def static_address(index: int) -> str:
    """Node `index`'s address on the data network when no IPAM pool hands one out."""
    return f"192.0.2.{10 + index}/{DATA_PREFIX}"


def provisioning_address(index: int) -> str:
    return f"198.51.100.{10 + index}/24"


@dataclass
class Network:
    registry: Registry
    router: str

    @classmethod
    def create(cls, registry: Registry) -> Network:
        net = cls(registry, registry.namespace(f"ma-{registry.tag}-rtr"))
        net.router_ip("link", "set", "lo", "up")
        for bridge, address, mac in (("br-data", f"{GATEWAY}/{DATA_PREFIX}", DATA_MAC),
                                     ("br-prov", f"{MANAGEMENT_ADDRESS}/24", PROV_MAC)):
            # A fixed address: a bridge otherwise takes its lowest port's, so adding or
            # removing a node would move the gateway's MAC under the other nodes' ARP
            # caches and cut them off for seconds.
            net.router_ip("link", "add", bridge, "address", mac, "type", "bridge")
            net.router_ip("link", "set", bridge, "up")
            net.router_ip("addr", "add", address, "dev", bridge)
        for address in (WORKLOAD_ADDRESS, NTP_ADDRESS):
            net.router_ip("addr", "add", f"{address}/32", "dev", "lo")
        return net

    def router_ip(self, *args: str) -> str:
        return self.ip("-n", self.router, *args)

    def ip(self, *args: str) -> str:
        return self.registry.tools.run(["ip", *args], timeout=10).stdout

    def add_node(self, index: int) -> str:
        """A node namespace wired to both bridges; `prov0` up with its boot address,
        `eth0` down and bare, for the agent."""
        node = self.registry.namespace(f"ma-{self.registry.tag}-n{index}")
        for link, peer, bridge in ((DATA_LINK, f"e{index}", "br-data"),
                                   (PROVISIONING_LINK, f"p{index}", "br-prov")):
            self.ip("-n", node, "link", "add", link, "type", "veth", "peer", "name", peer,
                    "netns", self.router)
            self.router_ip("link", "set", peer, "master", bridge)
            self.router_ip("link", "set", peer, "up")
        self.ip("-n", node, "link", "set", "lo", "up")
        self.ip("-n", node, "addr", "add", provisioning_address(index), "dev",
                PROVISIONING_LINK)
        self.ip("-n", node, "link", "set", PROVISIONING_LINK, "up")
        return node

    def gateway_down(self) -> None:
        """The gateway stops answering: its address leaves the data bridge."""
        self.router_ip("addr", "del", f"{GATEWAY}/{DATA_PREFIX}", "dev", "br-data")

    def node_addresses(self, node: str, link: str = DATA_LINK) -> list[str]:
        """Global addresses on a node's link, as `ip -brief addr` shows them."""
        words = self.ip("-n", node, "-brief", "addr", "show", "dev", link).split()
        return [w for w in words[2:] if not w.startswith("fe80:")]
