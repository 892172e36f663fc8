"""Hostile input, generated: every entry point that reads outside data either accepts it
or refuses it with an AgentError that names the field, never a traceback or a hang.
Covered here: AgentConfig (one field at a time replaced by hostile values), IPAM answers
(validate_allocation), bootstrap cloud-config, chronyc output and kubeadm output.
The renderers' round trips (a value cannot add a directive) are one shared property in
tests/unit/hostile/test_renderer_roundtrip.py."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import yaml
from hypothesis import given
from hypothesis import strategies as st

from agent.config import load_config
from agent.config.sources import FileSource
from agent.errors import AgentError, ConfigError, Reason
from agent.host import Host
from agent.ipam.base import Allocation, ClaimRequest, InvalidAllocation, validate_allocation
from agent.phases.join.classify import classify_output
from agent.phases.join.cloudconfig import parse_cloud_config
from agent.phases.time.chronyc import parse_sources, parse_tracking

HOSTILE_TEXT = st.one_of(
    st.text(max_size=40),
    st.sampled_from(["a\nb", "x\" y", "v # c", "a;b", "$(reboot)", "`id`", "a|b", "../..",
                     "", " ", "\x00", "a\\\nb", "[Match]", "server evil.example", "{{ x }}",
                     "-" * 300, "é", "\u202e", "a\rb"]),
    st.builds(lambda words: " ".join(words), st.lists(st.text(max_size=8), max_size=4)))
HOSTILE = st.one_of(HOSTILE_TEXT, st.integers(), st.floats(allow_nan=True), st.none(),
                    st.booleans(), st.lists(HOSTILE_TEXT, max_size=3),
                    st.dictionaries(HOSTILE_TEXT, HOSTILE_TEXT, max_size=2))

BASE: dict[str, Any] = {
    "apiVersion": "machine-agent.io/v1alpha1", "kind": "AgentConfig",
    "spec": {
        "network": {"hostname": "n1.example.net", "interfaces": [{
            "name": "eth0", "gateway": "192.0.2.1",
            "addresses": [{"static": "192.0.2.10/24"}],
            "routes": [{"to": "198.51.100.0/24", "via": "192.0.2.1"}]}],
            "dns": {"nameservers": ["192.0.2.53"], "search": ["example.net"]}},
        "time": {"servers": [{"host": "ntp.example.net"}], "syncTimeout": "30s"},
        "join": {"timeout": "30s"},
    }}
FIELDS = [
    ("network", "hostname"), ("network", "interfaces", 0, "name"),
    ("network", "interfaces", 0, "gateway"), ("network", "interfaces", 0, "addresses", 0,
                                              "static"),
    ("network", "interfaces", 0, "routes", 0, "to"), ("network", "dns", "nameservers", 0),
    ("network", "dns", "search", 0), ("time", "servers", 0, "host"),
    ("time", "syncTimeout"), ("join", "timeout")]


@given(field=st.sampled_from(FIELDS), value=HOSTILE)
def test_config_field_is_accepted_or_refused_by_name(tmp_path: Path, field: tuple[Any, ...],
                                                     value: Any) -> None:
    doc = copy.deepcopy(BASE)
    parent = doc["spec"]
    for step in field[:-1]:
        parent = parent[step]
    parent[field[-1]] = value
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump(doc))
    try:
        load_config(Host(tmp_path / "root"), [FileSource(str(path), outside_root=True)])
    except ConfigError as err:
        key = str(field[-1]) if isinstance(field[-1], str) else str(field[-2])
        # the field's path, or its object's with the field named (null: "give one of ...")
        assert any(key in e.path or key in e.message for e in err.errors), (field, value,
                                                                            str(err))
        return
    # accepted: then it is a plain value, with nothing that could start a new directive
    assert not (isinstance(value, str) and any(c in value for c in "\n\r\x00")), value


ADDRESSES = st.one_of(st.ip_addresses().map(str), HOSTILE_TEXT)


@given(address=ADDRESSES, prefix=st.integers(-5, 200), gateway=st.none() | ADDRESSES,
       family=st.sampled_from(["ipv4", "ipv6"]), dns=st.lists(ADDRESSES, max_size=2))
def test_ipam_answer_is_usable_or_refused_saying_what_is_wrong(
        address: str, prefix: int, gateway: str | None, family: str, dns: list[str]) -> None:
    alloc = Allocation(address, prefix, gateway, family, tuple(dns),  # type: ignore[arg-type]
                       handle="h", backend="fuzz")
    request = ClaimRequest("uid/eth0/" + family, "pool", family, "eth0")  # type: ignore[arg-type]
    try:
        ok = validate_allocation(alloc, request)
    except InvalidAllocation as err:
        assert "fuzz" in str(err) and err.reason == Reason.InvalidAllocation
        return
    iface = ok.interface
    assert iface.version == (4 if family == "ipv4" else 6)  # wrong family never passes
    if gateway is not None:
        import ipaddress

        assert ipaddress.ip_address(gateway) in iface.network  # nor a gateway outside


@given(text=st.one_of(HOSTILE_TEXT, st.lists(HOSTILE_TEXT, max_size=16).map(",".join)))
def test_chronyc_output_is_parsed_or_quoted_in_an_error(text: str) -> None:
    for parse in (parse_tracking, parse_sources):
        try:
            parse(text)
        except AgentError as err:  # anything else fails the test with its traceback
            assert "chronyc" in str(err) or str(err)


@given(text=HOSTILE_TEXT)
def test_kubeadm_output_always_classifies(text: str) -> None:
    found = classify_output(text)
    assert isinstance(found.reason, Reason) and found.summary


CLOUD = st.recursive(HOSTILE, lambda inner: st.one_of(
    st.lists(inner, max_size=3), st.dictionaries(
        st.sampled_from(["write_files", "runcmd", "path", "content", "permissions", "owner",
                         "encoding", "append"]), inner, max_size=4)), max_leaves=10)


@given(doc=CLOUD)
def test_bootstrap_cloud_config_is_parsed_or_refused(doc: Any) -> None:
    text = "#cloud-config\n" + yaml.safe_dump(doc)
    try:
        parse_cloud_config(text, node_name="n1")
    except AgentError as err:
        assert str(err)
