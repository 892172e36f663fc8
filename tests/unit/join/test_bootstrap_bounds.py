"""Bootstrap data and the files it names are bounded: Ignition's files together (as
cloud-config's write_files are), a cut gzip stream, JSON nested 100,000 deep, YAML aliases
in the kubeadm config it carries, and a FIFO where it reads or writes a file are each an
error naming what is wrong, never a hang, a MemoryError or a traceback."""

from __future__ import annotations

import base64
import gzip
import json
from pathlib import Path
from typing import Any

import pytest
import yaml
from machine_agent_sandbox.testkit.bootstrap import Flavour
from machine_agent_sandbox.testkit.bootstrap import cabpk_ignition as ignition

from agent.config.sources import FileSource, load_config
from agent.errors import ConfigError
from agent.host import Host
from agent.phases.join.cloudconfig import BootstrapDataError, parse_cloud_config
from agent.phases.join.ignition import parse_ignition
from agent.phases.join.joinconfig import JoinConfigError, read_kubeadm_configuration
from agent.phases.join.ondisk import current_content, read_node_file
from tests.unit.fifo import make_fifo, raised_within

CONFIG = ("apiVersion: kubeadm.k8s.io/v1beta4\nkind: JoinConfiguration\n"
          "discovery:\n  bootstrapToken:\n    apiServerEndpoint: 192.0.2.10:6443\n"
          "    token: abcdef.0123456789abcdef\n    unsafeSkipCAVerification: true\n"
          "nodeRegistration:\n  name: worker-0\n")
ALIASED = CONFIG + "x: &a [1, 2, 3]\ny: [*a, *a, *a]\n"
DEEP = "[" * 100_000 + "]" * 100_000


def ignition_doc() -> dict[str, Any]:
    doc: dict[str, Any] = json.loads(ignition(Flavour("join", CONFIG)))
    return doc


def gz_data_url(data: bytes) -> dict[str, str]:
    packed = base64.b64encode(gzip.compress(data, 9)).decode()
    return {"source": f"data:;base64,{packed}", "compression": "gzip"}


def test_ignition_files_are_capped_together_as_write_files_are() -> None:
    doc = ignition_doc()
    big = gz_data_url(b"\0" * (16 << 20))
    doc["storage"]["files"] += [{"path": f"/var/lib/f{i}", "contents": big}
                                for i in range(20)]
    with pytest.raises(BootstrapDataError,
                       match=r"storage\.files unpack to more than 67108864 bytes together"):
        parse_ignition(json.dumps(doc))


def test_a_cut_gzip_stream_in_ignition_is_refused_as_in_cloud_config() -> None:
    doc = ignition_doc()
    whole = gzip.compress(b"kubelet flags\n" * 1000)
    doc["storage"]["files"].append({"path": "/etc/x", "contents": {
        "source": "data:;base64," + base64.b64encode(whole[:len(whole) // 2]).decode(),
        "compression": "gzip"}})
    with pytest.raises(BootstrapDataError, match=r"storage.files\[2\]: .*truncated"):
        parse_ignition(json.dumps(doc))


def test_ignition_nested_100k_deep_is_refused_as_not_json() -> None:
    with pytest.raises(BootstrapDataError, match="not JSON: the JSON is nested too deeply"):
        parse_ignition('{"ignition": {"version": "3.4.0"}, "x": ' + DEEP + "}")


@pytest.mark.parametrize("carried_by", ["cloud-config", "ignition"])
def test_yaml_aliases_in_the_carried_kubeadm_config_are_refused_before_building(
        carried_by: str) -> None:
    if carried_by == "ignition":
        doc = ignition_doc()
        doc["storage"]["files"][-1]["contents"] = gz_data_url(ALIASED.encode())
        text = parse_ignition(json.dumps(doc)).files[-1].content.decode()
    else:
        packed = base64.b64encode(ALIASED.encode()).decode()
        data = ("#cloud-config\nwrite_files:\n- path: /run/kubeadm/kubeadm-join-config.yaml\n"
                f"  encoding: b64\n  content: {packed}\nruncmd:\n"
                "- kubeadm join --config /run/kubeadm/kubeadm-join-config.yaml\n")
        text = parse_cloud_config(data, node_name="worker-0").files[0].content.decode()
    with pytest.raises(JoinConfigError, match=r"uses a YAML alias \(\*a\) at line 11"):
        read_kubeadm_configuration(text, "join")


def test_a_fifo_where_bootstrap_data_writes_a_file_is_refused_by_name(tmp_path: Path) -> None:
    fifo = make_fifo(tmp_path, "/etc/kubernetes/x.conf")
    err = raised_within(10, fifo, lambda: current_content(Host(tmp_path), "/etc/kubernetes/x.conf"))
    assert isinstance(err, BootstrapDataError)
    assert "write_files /etc/kubernetes/x.conf: the node's file cannot be read: is a FIFO" \
        in str(err)


def test_a_fifo_as_the_discovery_kubeconfig_is_refused_by_name(tmp_path: Path) -> None:
    fifo = make_fifo(tmp_path, "/etc/kubernetes/discovery.conf")
    err = raised_within(10, fifo, lambda: read_node_file(
        Host(tmp_path), "/etc/kubernetes/discovery.conf", "discovery.file.kubeConfigPath"))
    assert isinstance(err, BootstrapDataError)
    assert "discovery.file.kubeConfigPath /etc/kubernetes/discovery.conf cannot be read: " \
        "is a FIFO, not a regular file" in str(err)


def agent_config(root: Path, network: dict[str, Any]) -> None:
    path = root / "etc/machine-agent/config.yaml"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump({"apiVersion": "machine-agent.io/v1alpha1",
                                    "kind": "AgentConfig", "spec": {"network": network}}))


def load(root: Path) -> list[str]:
    try:
        load_config(Host(root), [FileSource("/etc/machine-agent/config.yaml")])
    except ConfigError as err:
        return [str(e) for e in err.errors]
    return []


def test_a_fifo_named_by_network_config_from_is_refused_by_name(tmp_path: Path) -> None:
    fifo = make_fifo(tmp_path, "/nc.yaml")
    agent_config(tmp_path, {"networkConfigFrom": "/nc.yaml"})
    errors: list[str] = []
    assert raised_within(10, fifo, lambda: errors.extend(load(tmp_path))) is None
    assert any("cannot read /nc.yaml: is a FIFO, not a regular file" in e for e in errors)


def test_cloud_inits_network_config_nested_100k_deep_is_an_error_by_name(
        tmp_path: Path) -> None:
    run = tmp_path / "run/cloud-init"
    run.mkdir(parents=True)
    (run / "result.json").write_text("{}")
    (run / "instance-data-sensitive.json").write_text(json.dumps(
        {"v1": {"instance_id": "iid-node-9"}, "ds": {"meta_data": {}}}))
    instance = tmp_path / "var/lib/cloud/instances/iid-node-9"
    instance.mkdir(parents=True)
    (instance / "network-config.json").write_text(DEEP)
    agent_config(tmp_path, {"networkConfigFrom": "cloud-init"})
    errors = load(tmp_path)
    assert any("network-config.json" in e and "nested too deeply" in e for e in errors), errors


def test_yaml_aliases_in_a_network_config_file_are_refused_before_building(
        tmp_path: Path) -> None:
    (tmp_path / "nc.yaml").write_text("network:\n  version: 2\n  ethernets:\n"
                                      "    eth0: &a {dhcp4: true}\n    eth1: *a\n")
    agent_config(tmp_path, {"networkConfigFrom": "/nc.yaml"})
    errors = load(tmp_path)
    assert any("uses a YAML alias (*a) at line 5" in e for e in errors), errors
