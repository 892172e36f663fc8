"""Netlink for every phase and the doctor: the rtnetlink client, what the namespace holds
now, and the address probes (RFC 5227 ARP, IPv6 DAD)."""
