"""DMI identity read under the Host root: the UUID and serial a Machine is discovered by,
and placeholders that many machines share refused by name."""

from __future__ import annotations

from pathlib import Path

import pytest

from agent import dmi
from agent.config.identity import DiscoverySpec, IdentitySpec
from agent.errors import PermanentError, Reason
from agent.host import Host
from agent.kube.client import Client
from agent.kube.kubeconfig import Credentials
from agent.kube.machine import MachineReader
from tests.unit.kube.fake_session import FakeSession, response

UUID = "4C4C4544-0042-3510-8051-B7C04F565A31"


def dmi_tree(tmp_path: Path, **files: str) -> Host:
    base = tmp_path / "sys/class/dmi/id"
    base.mkdir(parents=True)
    for name, text in files.items():
        (base / name).write_text(text + "\n")
    return Host(tmp_path)


def test_uuid_and_serial_as_the_firmware_wrote_them(tmp_path: Path) -> None:
    host = dmi_tree(tmp_path, product_uuid=UUID, product_serial="CZJ4510F6K")
    assert dmi.product_uuid(host) == UUID.lower()
    assert dmi.product_serial(host) == "CZJ4510F6K"


@pytest.mark.parametrize(("files", "call", "expected"), [
    ({}, dmi.product_uuid,
     "DMI: /sys/class/dmi/id/product_uuid (the product UUID) does not exist"),
    ({"product_uuid": "03000200-0400-0500-0006-000700080009"}, dmi.product_uuid,
     "holds the placeholder 03000200-0400-0500-0006-000700080009, which other machines"),
    ({"product_uuid": "not-a-uuid"}, dmi.product_uuid,
     "DMI: /sys/class/dmi/id/product_uuid holds 'not-a-uuid', not a UUID"),
    ({"product_serial": "To Be Filled By O.E.M."}, dmi.product_serial,
     "DMI: /sys/class/dmi/id/product_serial holds the placeholder 'To Be Filled By O.E.M.'"),
])
def test_missing_malformed_and_placeholder_values_are_refused(
        tmp_path: Path, files: dict[str, str], call: object, expected: str) -> None:
    host = dmi_tree(tmp_path, **files)
    with pytest.raises(PermanentError) as err:
        call(host)  # type: ignore[operator]
    assert err.value.reason == Reason.MachineNotFound
    assert expected in str(err.value)
    assert "spec.identity.machine" in str(err.value)


def test_discovery_by_serial_selects_both_labels(tmp_path: Path) -> None:
    host = dmi_tree(tmp_path, product_uuid=UUID, product_serial="CZJ4510F6K")
    session = FakeSession([response(200, {"items": []})])
    reader = MachineReader(Client(Credentials("https://mgmt.example"),
                                  session=session),
                           host, wait=0)
    with pytest.raises(PermanentError) as err:
        reader.read(IdentitySpec(discovery=DiscoverySpec(
            namespace="fleet", host_serial_label="example.com/serial")))
    selector = f"machine-agent.io/host-uuid={UUID.lower()},example.com/serial=CZJ4510F6K"
    assert session.sent[0].params["labelSelector"] == selector
    assert f"labels {selector} in namespace fleet: none matches" in str(err.value)


def test_a_serial_that_is_no_label_value_is_refused_naming_the_file(tmp_path: Path) -> None:
    host = dmi_tree(tmp_path, product_uuid=UUID, product_serial="SN 42,x=y")
    reader = MachineReader(Client(Credentials("https://mgmt.example"),
                                  session=FakeSession()),
                           host, wait=0)
    with pytest.raises(PermanentError) as err:
        reader.read(IdentitySpec(discovery=DiscoverySpec(host_serial_label="example.com/sn")))
    assert "DMI: /sys/class/dmi/id/product_serial: \"SN 42,x=y\" is not a valid label value" \
        in str(err.value)
