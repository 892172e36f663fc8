"""The MAC address a created bridge gets: networkd's, from SipHash-2-4 of the machine ID
and the name (the real networkd differential tests compare it with networkd's own)."""

from __future__ import annotations

from pathlib import Path

from agent.host import Host
from agent.phases.network.hwaddr import machine_id, networkd_address, siphash24


def test_siphash_gives_the_reference_vector() -> None:
    # the SipHash paper's test vector: key 00..0f, message 00..0e
    assert siphash24(bytes(range(16)), bytes(range(15))) == 0xA129CA6149BE45E5
    assert siphash24(bytes(range(16)), b"") == 0x726FDB47DD0E0E31


def test_the_address_is_unicast_locally_administered_and_stable(tmp_path: Path) -> None:
    (tmp_path / "etc").mkdir()
    (tmp_path / "etc/machine-id").write_text("3d1219c7c4c5404aaa1f6d2a48adfda4\n")
    machine = machine_id(Host(tmp_path, read_only=True))
    first = networkd_address(machine, "br0")
    assert len(first) == 6 and first[0] & 0x01 == 0 and first[0] & 0x02
    assert first == networkd_address(machine, "br0") != networkd_address(machine, "br1")


def test_without_a_machine_id_the_address_is_still_given(tmp_path: Path) -> None:
    assert machine_id(Host(tmp_path, read_only=True)) == bytes(16)
