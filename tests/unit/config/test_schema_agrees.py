"""`config schema` and `config validate` agree: what an editor with the schema refuses,
the agent refuses, and the other way round, for the values whose checks the schema can
say (bounds, formats, patterns). Checked by a real validator (jsonschema, with formats)."""

from __future__ import annotations

import contextlib
import io
import json
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import yaml

from agent.cli import main

Spec = dict[str, Any]


@pytest.fixture(scope="module")
def validator() -> jsonschema.Draft202012Validator:
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert main(["config", "schema"]) == 0
    return jsonschema.Draft202012Validator(
        json.loads(out.getvalue()), format_checker=jsonschema.Draft202012Validator.FORMAT_CHECKER)


def iface(**fields: Any) -> Spec:
    return {"network": {"interfaces": [{"name": "eno1", **fields}]}}


def address(value: str) -> Spec:
    return iface(addresses=[{"static": value}])


def ntp(*servers: Any) -> Spec:
    return {"time": {"servers": list(servers)}}


REFUSED: dict[str, Spec] = {
    "MTU 90000": iface(mtu=90000),
    "MTU 67": iface(mtu=67),
    "NTP port 70000": ntp({"host": "192.0.2.123", "port": 70000}),
    "NTP port 0": ntp({"host": "192.0.2.123", "port": 0}),
    "host ntp..example": ntp("ntp..example"),
    "host ntp..example as an object": ntp({"host": "ntp..example"}),
    "host with a space": ntp("ntp example"),
    "host label of 64": ntp("a" * 64 + ".example"),
    "address 192.0.2.17/33": address("192.0.2.17/33"),
    "address without prefix": address("192.0.2.17"),
    "address 256.0.2.17/24": address("256.0.2.17/24"),
    "IPv6 prefix 129": address("2001:db8::17/129"),
    "interface name of digits": {"network": {"interfaces": [{"name": "12"}]}},
    "interface name of 16": {"network": {"interfaces": [{"name": "e" * 16}]}},
    "interface name all": {"network": {"interfaces": [{"name": "all"}]}},
    "gateway not an address": iface(gateway="192.0.2.300"),
    "management server http": {"management": {"server": "http://192.0.2.1:6443"}},
    "relative token file": {"management": {"tokenFile": "etc/token"}},
    "token file with ..": {"management": {"tokenFile": "/etc/../token"}},
    "zero sync timeout": {"time": {"syncTimeout": "0s"}},
    "zero attempts": {"retry": {"attempts": 0}},
}

ACCEPTED: dict[str, Spec] = {
    "MTU 9000": iface(mtu=9000),
    "MTU 68": iface(mtu=68),
    "NTP port 123": ntp({"host": "192.0.2.123", "port": 123}),
    "host name with trailing dot": ntp("ntp1.example.net."),
    "IPv6 server": ntp("2001:db8::123"),
    "address 192.0.2.17/32": address("192.0.2.17/32"),
    "IPv6 address": address("2001:db8:0:1::17/64"),
    "interface name with dot": {"network": {"interfaces": [{"name": "eno1.100"}]}},
    "sync timeout 5m": {"time": {"syncTimeout": "5m"}},
    "sync timeout 0.5s": {"time": {"syncTimeout": "0.5s"}},
}


def document(spec: Spec) -> Spec:
    return {"apiVersion": "machine-agent.io/v1alpha1", "kind": "AgentConfig", "spec": spec}


def validate_exit(spec: Spec, tmp_path: Path) -> int:
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump(document(spec)))
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
        return main(["config", "validate", str(path)])


@pytest.mark.parametrize("case", list(REFUSED))
def test_what_config_validate_refuses_the_schema_refuses(
        case: str, validator: jsonschema.Draft202012Validator, tmp_path: Path) -> None:
    spec = REFUSED[case]
    assert validate_exit(spec, tmp_path) == 2, "config validate accepted it"
    assert list(validator.iter_errors(document(spec))), "the schema accepted it"


@pytest.mark.parametrize("case", list(ACCEPTED))
def test_what_config_validate_accepts_the_schema_accepts(
        case: str, validator: jsonschema.Draft202012Validator, tmp_path: Path) -> None:
    spec = ACCEPTED[case]
    assert validate_exit(spec, tmp_path) == 0, "config validate refused it"
    assert [e.message for e in validator.iter_errors(document(spec))] == []
