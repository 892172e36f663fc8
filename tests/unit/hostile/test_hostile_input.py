"""Hostile input, generated: every entry point that reads outside data either accepts it
or refuses it with an AgentError that names the field, never a traceback or a hang.
Covered here: AgentConfig (one field at a time replaced by hostile values), IPAM answers
(validate_allocation), bootstrap cloud-config, chronyc output and kubeadm output.
The renderers' round trips (a value cannot add a directive) are one shared property in
tests/unit/hostile/test_renderer_roundtrip.py."""

from __future__ import annotations

import base64
import copy
import re
from pathlib import Path
from typing import Any

import pytest
import requests
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from agent import cli
from agent.config.identity import IdentitySpec, MachineRef
from agent.errors import AgentError, ConfigError, Reason
from agent.host import Host
from agent.ipam.base import Allocation, ClaimRequest, InvalidAllocation, validate_allocation
from agent.kube.client import Client
from agent.kube.kubeconfig import Credentials
from agent.kube.machine import MachineReader
from agent.phases.join.classify import classify_output
from agent.phases.join.cloudconfig import parse_cloud_config
from agent.phases.time.chronyc import parse_sources, parse_tracking
from agent.retry import Backoff
from tests.unit.hostile.config_doc import BASE, load_with
from tests.unit.kube.fake_session import FakeSession, response, status

HOSTILE_TEXT = st.one_of(
    st.text(max_size=40),
    st.sampled_from(["a\nb", "x\" y", "v # c", "a;b", "$(reboot)", "`id`", "a|b", "../..",
                     "", " ", "\x00", "a\\\nb", "[Match]", "server evil.example", "{{ x }}",
                     "-" * 300, "é", "\u202e", "a\rb"]),
    st.builds(lambda words: " ".join(words), st.lists(st.text(max_size=8), max_size=4)))
HOSTILE = st.one_of(HOSTILE_TEXT, st.integers(), st.floats(allow_nan=True), st.none(),
                    st.booleans(), st.lists(HOSTILE_TEXT, max_size=3),
                    st.dictionaries(HOSTILE_TEXT, HOSTILE_TEXT, max_size=2))

FIELDS = [
    ("network", "hostname"), ("network", "interfaces", 0, "name"),
    ("network", "interfaces", 0, "gateway"), ("network", "interfaces", 0, "addresses", 0,
                                              "static"),
    ("network", "interfaces", 0, "routes", 0, "to"), ("network", "dns", "nameservers", 0),
    ("network", "dns", "search", 0), ("time", "servers", 0, "host"),
    ("time", "syncTimeout"), ("join", "timeout"),
    ("identity", "machine", "name"), ("identity", "machine", "namespace"),
    ("identity", "nodeName"),
    ("management", "server"), ("management", "tokenFile"), ("management", "caFile"),
    ("management", "requestTimeout"), ("management", "bootstrapWait"),
    ("network", "interfaces", 0, "addresses", 1, "ipam", "pool"),
    ("network", "interfaces", 0, "addresses", 1, "ipam", "family"),
    ("ipam", "plugins", "capi", "timeout"), ("ipam", "plugins", "capi", "apiVersion"),
    ("ipam", "plugins", "capi", "pools", "workers", "name"),
    ("ipam", "plugins", "capi", "pools", "workers", "kind"),
    ("retry", "attempts"), ("retry", "initialDelay"), ("retry", "maxDelay"),
    ("lifecycle", "onDelete", "policy"), ("lifecycle", "onDelete", "resetTimeout"),
    ("lifecycle", "reconfigure", 0), ("lifecycle", "watch")]


@settings(max_examples=300)
@given(field=st.sampled_from(FIELDS), value=HOSTILE)
def test_config_field_is_accepted_or_refused_by_name(tmp_path: Path, field: tuple[Any, ...],
                                                     value: Any) -> None:
    try:
        load_with(tmp_path, field, value)
    except ConfigError as err:
        key = str(field[-1]) if isinstance(field[-1], str) else str(field[-2])
        # the field's path, or its object's with the field named (null: "give one of ...")
        assert any(key in e.path or key in e.message for e in err.errors), (field, value,
                                                                            str(err))
        return
    # accepted: then it is a plain value, with nothing that could start a new directive
    assert not (isinstance(value, str) and any(c in value for c in "\n\r\x00")), value


def test_config_validate_refuses_a_capi_pool_that_names_no_pool_object(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Refused by `config validate`, at its path, not first at run time as PoolNotFound."""
    doc = copy.deepcopy(BASE)
    doc["spec"]["network"]["interfaces"][0]["addresses"][1]["ipam"]["pool"] = \
        "../../secrets/x?y=1"
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump(doc))
    assert cli.main(["config", "validate", str(path)]) == 2
    assert ("spec.network.interfaces[0].addresses[1].ipam.pool: '../../secrets/x?y=1' is "
            "not a pool of spec.ipam.plugins.capi.pools") in capsys.readouterr().err


SCOPED = st.builds(lambda a, scope: f"{a}%{scope}", st.ip_addresses(v=6).map(str),
                   st.one_of(st.sampled_from(["eth0", "x\nallow all", "1\u2028", "a\rb"]),
                             st.text(max_size=12)))
"""Addresses with an IPv6 scope id: Python's parser takes anything after `%` (issue 26)."""
MAPPED = st.ip_addresses(v=4).map(lambda a: f"::ffff:{a}")
ADDRESSES = st.one_of(st.ip_addresses().map(str), HOSTILE_TEXT, SCOPED, MAPPED)


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
    # nothing accepted carries a scope id, a separator, a /0 or an IPv4-mapped address
    for text in (address, gateway or "", *dns):
        assert "%" not in text and text.isprintable(), text
    assert prefix > 0 and not (iface.version == 6 and iface.ip.ipv4_mapped)
    if gateway is not None:
        import ipaddress

        assert ipaddress.ip_address(gateway) in iface.network  # nor a gateway outside


@given(text=st.one_of(HOSTILE_TEXT, st.lists(HOSTILE_TEXT, max_size=16).map(",".join)))
def test_chronyc_output_is_parsed_or_quoted_in_an_error(text: str) -> None:
    for parse, command in ((parse_tracking, "chronyc -c tracking"),
                           (parse_sources, "chronyc -c sources")):
        try:
            parse(text)
        except AgentError as err:  # anything else fails the test with its traceback
            # which command's output, and the output itself (its start), quoted
            assert f"cannot parse `{command}` output: {text[:300]!r}" in str(err), str(err)


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
    except AgentError as err:  # anything else fails the test with its traceback
        message = str(err)
        if not isinstance(doc, dict):
            assert "the bootstrap data is not a cloud-config mapping" in message, message
            return
        # the entry at fault, by its place in the document: write_files[1], runcmd
        named = re.search(r"cloud-config (write_files|runcmd)(?:\[(\d+)\])?", message)
        assert named is not None, message
        key, index = named.group(1), named.group(2)
        if index is None:
            assert not isinstance(doc[key], list), message
        else:
            assert isinstance(doc[key], list) and int(index) < len(doc[key]), message


# -- the Machine, its Cluster and its bootstrap Secret, as the management cluster serves
# them (a hand-made or corrupted object must not end in a traceback) ---------------------

MACHINE_WHERE = "Machine default/worker-0"
READ: dict[str, Any] = {
    "machines": {"metadata": {"name": "worker-0", "namespace": "default", "uid": "u-1",
                              "generation": 3, "labels": {"a": "b"},
                              "annotations": {"machine-agent.io/config": "configmap/cfg"}},
                 "spec": {"clusterName": "c1", "version": "v1.31.2",
                          "providerID": "metal3://x",
                          "bootstrap": {"dataSecretName": "worker-0-bootstrap"}}},
    "clusters": {"spec": {"controlPlaneEndpoint": {"host": "192.0.2.100", "port": 6443}},
                 "status": {"initialization": {"controlPlaneInitialized": True},
                            "conditions": [{"type": "Ready", "status": "True"}]}},
    "secrets": {"data": {"value": base64.b64encode(b"#cloud-config\n").decode(),
                         "format": base64.b64encode(b"cloud-config").decode()}},
    "configmaps": {"data": {"config.yaml": "spec: {}\n"}},
}
OBJECT_FIELDS = [
    ("machines", f"{MACHINE_WHERE}", path) for path in (
        (), ("metadata",), ("metadata", "uid"), ("metadata", "generation"),
        ("metadata", "labels"), ("metadata", "annotations"), ("metadata", "deletionTimestamp"),
        ("spec",), ("spec", "bootstrap"), ("spec", "bootstrap", "dataSecretName"),
        ("spec", "clusterName"), ("spec", "version"), ("spec", "providerID"))] + [
    ("clusters", "Cluster default/c1", path) for path in (
        ("spec",), ("spec", "controlPlaneEndpoint"), ("spec", "controlPlaneEndpoint", "host"),
        ("spec", "controlPlaneEndpoint", "port"), ("status",), ("status", "initialization"),
        ("status", "conditions"))] + [
    ("secrets", "Secret default/worker-0-bootstrap", path) for path in (
        ("data",), ("data", "value"), ("data", "format"))] + [
    ("configmaps", "configmap default/cfg", path) for path in (
        ("data",), ("data", "config.yaml"))]
SHAPES = st.recursive(HOSTILE, lambda inner: st.one_of(
    st.lists(inner, max_size=2), st.dictionaries(HOSTILE_TEXT, inner, max_size=2)),
    max_leaves=6)


class RoutedSession(FakeSession):
    """Answers a GET by the kind of object it asks for."""

    def __init__(self, objects: dict[str, Any]) -> None:
        super().__init__()
        self.objects = objects

    def request(self, method: str, url: str, **kwargs: Any) -> requests.Response:
        plural = url.split("/")[-2]
        return response(200, self.objects[plural]) if plural in self.objects else \
            response(404, status(404, "NotFound", "not found"))


@given(target=st.sampled_from(OBJECT_FIELDS), value=SHAPES)
def test_a_machine_cluster_or_secret_is_read_or_refused_naming_the_field(
        tmp_path: Path, target: tuple[str, str, tuple[str, ...]], value: Any) -> None:
    plural, where, path = target
    objects = copy.deepcopy(READ)
    if path:
        parent = objects[plural]
        for step in path[:-1]:
            parent = parent[step]
        parent[path[-1]] = value
    else:
        objects[plural] = value
    client = Client(Credentials("https://mgmt:6443"), backoff=Backoff(0.01, 0.01, 2),
                    sleep=lambda s: None, session=RoutedSession(objects))  # type: ignore[arg-type]
    reader = MachineReader(client, Host(tmp_path), wait=0)
    try:
        view = reader.read(IdentitySpec(machine=MachineRef("worker-0")))
    except AgentError as err:  # anything else fails the test with its traceback
        if not path:  # not an object at all: the client's refusal, or a Machine without name
            assert "a Machine" in str(err) or "JSON" in str(err), str(err)
            return
        # a Machine without a readable name is "a Machine"
        named_by = where in str(err) or (path[0] == "metadata" and "a Machine:" in str(err))
        assert named_by and path[-1] in str(err), (target, value, str(err))
        assert err.reason in (Reason.MachineInvalid, Reason.ConfigInvalid), err.reason
        return
    # accepted: the facts hold what was served, typed; the configuration the Machine
    # points at is text, or a problem naming its object and field for `config` to list
    assert isinstance(view.generation, int) and isinstance(view.facts.uid, str)
    if plural == "configmaps":
        assert view.config is not None and view.config.origin == "configmap default/cfg"
        problem = str(view.config.problem)
        assert isinstance(view.config.text, str) or path[-1] in problem or \
            "config.yaml" in problem, problem
    assert view.facts.control_plane_endpoint in (None, "192.0.2.100:6443") or \
        path[:2] == ("spec", "controlPlaneEndpoint")
