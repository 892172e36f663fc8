"""CABPK bootstrap data beyond write_files and runcmd: Ignition (what CABPK's CLC
template converts to), bootcmd, and every other key delegated or refused by name."""

from __future__ import annotations

import base64
import gzip
import hashlib
import json
from pathlib import Path
from typing import Any

import pytest
import yaml
from machine_agent_sandbox.testkit.bootstrap import (
    Flavour,
    cabpk_cloud_config,
    cabpk_ignition,
)

from agent.config import AgentConfig, load_config
from agent.config.sources import FileSource
from agent.errors import AgentError
from agent.host import Host
from agent.phases.join.cloudconfig import Command, KubeadmJoin, parse_cloud_config
from agent.phases.join.datakeys import check_other_keys
from agent.phases.join.ignition import parse_ignition

JOIN = "kubeadm join --config /run/kubeadm/kubeadm-join-config.yaml"
CONFIG = "apiVersion: kubeadm.k8s.io/v1beta4\nkind: JoinConfiguration\n"


def config(tmp_path: Path, spec: dict[str, Any]) -> AgentConfig:
    path = tmp_path / "agent.yaml"
    path.write_text(yaml.safe_dump({"apiVersion": "machine-agent.io/v1alpha1",
                                    "kind": "AgentConfig", "spec": spec}))
    return load_config(Host(tmp_path), [FileSource("/agent.yaml", required=True)]).config


def test_ignition_as_cabpk_emits_it_becomes_files_scripts_and_the_managed_join() -> None:
    flavour = Flavour("join", CONFIG, pre=("cat <<EOF > /tmp/x", "overlay", "EOF"),
                      post=("echo done",))
    parsed = parse_ignition(cabpk_ignition(flavour))
    assert [f.path for f in parsed.files] == ["/etc/kubeadm.sh", "/etc/kubeadm.yml"]
    assert parsed.file("/etc/kubeadm.yml") is not None
    assert parsed.files[1].content.decode() == CONFIG and parsed.files[1].mode == 0o600
    pre, join, post = parsed.steps
    # the commands before kubeadm stay one `set -e` script: the heredoc keeps its meaning
    assert isinstance(pre, Command) and pre.argv == (
        "bash", "-e", "-c", "cat <<EOF > /tmp/x\noverlay\nEOF\n")
    assert isinstance(join, KubeadmJoin)
    assert (join.command, join.config_path, join.sentinel) == ("join", "/etc/kubeadm.yml",
                                                               True)
    assert isinstance(post, Command) and post.argv[-1] == "mv /etc/kubeadm.yml /tmp/\necho done\n"
    assert parsed.other == {}  # kubeadm.service is the agent's own job, not installed


def test_ignition_3_gzip_base64_contents_are_unpacked_and_verified() -> None:
    doc = json.loads(cabpk_ignition(Flavour("init", CONFIG.replace("Join", "Init")), "3.4.0",
                              compress=True))
    parsed = parse_ignition(json.dumps(doc))
    assert parsed.join.command == "init"
    assert parsed.files[1].content.decode() == CONFIG.replace("Join", "Init")
    entry = doc["storage"]["files"][1]
    raw = base64.b64decode(entry["contents"]["source"].split(",", 1)[1])
    entry["contents"]["verification"] = {"hash": "sha512-" + hashlib.sha512(raw).hexdigest()}
    assert parse_ignition(json.dumps(doc)).files[1].content == gzip.decompress(raw)
    entry["contents"]["verification"] = {"hash": "sha512-" + "0" * 128}
    with pytest.raises(AgentError, match=r"storage.files\[1\]: the contents do not match "
                                         "verification.hash"):
        parse_ignition(json.dumps(doc))


@pytest.mark.parametrize(("change", "message"), [
    (lambda d: d["storage"]["files"][0]["contents"].update(source="https://evil/x"),
     r"storage.files\[0\].contents.source: a 'https' URL is not fetched"),
    (lambda d: d["systemd"]["units"].clear(), "does not enable kubeadm.service"),
    (lambda d: d["ignition"].update(version="1.0.0"), "ignition.version '1.0.0'"),
    (lambda d: d["storage"]["files"][0].update(path="etc/relative"),
     r"storage.files\[0\].path"),
])
def test_ignition_the_agent_cannot_carry_out_is_refused_by_name(change: Any,
                                                                message: str) -> None:
    doc = json.loads(cabpk_ignition(Flavour("join", CONFIG)))
    change(doc)
    with pytest.raises(AgentError, match=message):
        parse_ignition(json.dumps(doc))


def test_bootcmd_is_carried_out_and_other_keys_are_kept_for_their_owner() -> None:
    text = "#cloud-config\n" + yaml.safe_dump({
        "bootcmd": ["echo boot"], "runcmd": [JOIN], "ntp": {"servers": ["ntp.example"]},
        "users": [{"name": "ops"}]})
    parsed = parse_cloud_config(text, node_name="n")
    assert [(c.argv, c.text) for c in parsed.boot] == [(("sh", "-c", "echo boot"), "echo boot")]
    assert sorted(parsed.other) == ["ntp", "users"]


def test_ntp_is_delegated_to_the_time_phase_when_it_holds_every_server(
        tmp_path: Path) -> None:
    agent = config(tmp_path, {"time": {"servers": ["ntp.example", "ntp2.example"]}})
    notes = check_other_keys({"ntp": {"enabled": True, "servers": ["ntp.example"]}}, agent,
                             "cloud-config")
    assert notes == ["cloud-config ntp: delegated to the time phase (spec.time.servers holds "
                     "every server it names)"]


def test_every_key_the_agent_does_not_carry_out_is_refused_by_name_with_its_fix(
        tmp_path: Path) -> None:
    agent = config(tmp_path, {"time": {"servers": ["ntp.example"]}})
    other = {"ntp": {"servers": ["other.example"]}, "users": [{"name": "ops"}],
             "disk_setup": {"/dev/sdb": {"table_type": "gpt"}}, "mounts": [["LABEL", "/d"]],
             "fs_setup": [{"label": "d"}], "package_update": True, "write_files_x": 1,
             "systemd.units.ntpd.service": {"enabled": True}, "passwd.users": []}
    with pytest.raises(AgentError) as info:
        check_other_keys(other, agent, "cloud-config")
    shown = str(info.value)
    assert shown.startswith("the bootstrap data asks for 8 thing(s) the agent refuses: ")
    for part in ("cloud-config ntp: servers other.example are not in spec.time.servers",
                 "cloud-config users: the agent does not carry this out; bake the accounts",
                 "cloud-config disk_setup: the agent does not carry this out; partition",
                 "cloud-config mounts:", "cloud-config fs_setup:",
                 "cloud-config package_update: not a key CABPK writes",
                 "cloud-config systemd.units.ntpd.service: the agent does not enable the "
                 "image's units; enable it in the image"):
        assert part in shown
    assert "passwd.users" not in shown  # empty: nothing asked for


def test_ntp_with_the_time_phase_skipped_is_refused(tmp_path: Path) -> None:
    agent = config(tmp_path, {"skipPhases": ["time"]})
    with pytest.raises(AgentError, match="the time phase is skipped"):
        check_other_keys({"ntp": {"servers": ["ntp.example"]}}, agent, "ignition")


def accepted(text: str, agent: AgentConfig) -> list[str]:
    """What the join phase makes of Ignition data: its notes, or it raises."""
    return check_other_keys(parse_ignition(text).other, agent, "ignition")


# The head of every document CABPK writes: Go marshals flatcar/ignition's v2_3 types, whose
# struct fields are written even when empty.
CABPK_HEAD = ('{"ignition":{"config":{},"security":{"tls":{}},"timeouts":{},'
              '"version":"2.3.0"},"networkd":{},"passwd":{},')


def test_ignition_as_go_marshals_it_for_cabpk_is_accepted(tmp_path: Path) -> None:
    text = cabpk_ignition(Flavour("join", CONFIG, pre=("echo pre",)))
    assert text.startswith(CABPK_HEAD) and '"verification":{}' in text
    assert accepted(text, config(tmp_path, {})) == []
    assert parse_ignition(text).file("/etc/kubeadm.yml") is not None


def change_file(key: str, value: Any) -> Any:
    return lambda d: d["storage"]["files"][0].update({key: value})


@pytest.mark.parametrize(("change", "named"), [
    (lambda d: d["ignition"]["config"].update(append=[{"source": "https://x/c.ign"}]),
     "ignition ignition.config: the agent does not carry this out; it only concerns "
     "configs and contents fetched from elsewhere"),
    (lambda d: d["ignition"]["security"]["tls"].update(
        certificateAuthorities=[{"source": "data:,x"}]), "ignition ignition.security:"),
    (lambda d: d["ignition"].update(timeouts={"httpTotal": 5}), "ignition ignition.timeouts:"),
    (lambda d: d["networkd"].update(units=[{"name": "10-eth0.network"}]),
     "ignition networkd.units: the agent does not carry this out; the network phase owns"),
    (lambda d: d["storage"].update(directories=[{"path": "/x", "filesystem": "root"}]),
     "ignition storage.directories:"),
    (lambda d: d["storage"].update(links=[{"path": "/x", "target": "/y"}]),
     "ignition storage.links:"),
    (lambda d: d["passwd"].update(groups=[{"name": "ops"}]), "ignition passwd.groups:"),
    (lambda d: d.update(extras={}), "ignition extras: not a key CABPK writes"),
    (lambda d: d["ignition"].update(extras={}), "ignition ignition.extras: not a key CABPK"),
    (lambda d: d["systemd"]["units"].append({"name": "var-lib-x.mount", "enabled": True,
                                             "contents": "[Mount]\n"}),
     "ignition systemd.units.var-lib-x.mount: the agent does not install units"),
])
def test_a_set_ignition_field_the_agent_does_not_carry_out_is_refused_by_name(
        tmp_path: Path, change: Any, named: str) -> None:
    doc = json.loads(cabpk_ignition(Flavour("join", CONFIG)))
    change(doc)
    with pytest.raises(AgentError) as info:
        accepted(json.dumps(doc), config(tmp_path, {}))
    assert named in str(info.value)


@pytest.mark.parametrize(("change", "message"), [
    (change_file("overwrite", False), r"storage.files\[0\].overwrite: false is not carried"),
    (change_file("size", 3), r"storage.files\[0\].size: not a field of an Ignition file"),
    (lambda d: d["storage"]["files"][0]["contents"].update(
        httpHeaders=[{"name": "A", "value": "b"}]),
     r"storage.files\[0\].contents.httpHeaders: not carried out"),
    (lambda d: d["storage"]["files"][0].update(user={"name": "root", "home": "/"}),
     r"storage.files\[0\].user.home: not a field"),
    (lambda d: d["systemd"]["units"][0].update(dropins=[{
        "name": "10-x.conf", "contents": "[Service]\nExecStart=\nExecStart=/bin/true\n"}]),
     r"systemd.units\[0\] \(kubeadm.service\).dropins\[0\] \(10-x.conf\) line 2: "
     r"'ExecStart=' changes how kubeadm.service runs"),
    (lambda d: d["systemd"]["units"][0].update(contents="[Service]\nExecStart=/bin/true\n"),
     r"systemd.units\[0\] \(kubeadm.service\): not CABPK's unit"),
])
def test_an_ignition_entry_the_agent_cannot_carry_out_is_refused_at_once(
        change: Any, message: str) -> None:
    doc = json.loads(cabpk_ignition(Flavour("join", CONFIG)))
    change(doc)
    with pytest.raises(AgentError, match=message):
        parse_ignition(json.dumps(doc))


def both_formats(flavour: Flavour) -> dict[str, tuple[dict[str, Any], list[str]]]:
    """Each format's other keys and the paths of the files it writes."""
    out = {}
    for kind, parsed in (("cloud-config", parse_cloud_config(cabpk_cloud_config(flavour),
                                                             node_name="n")),
                         ("ignition", parse_ignition(cabpk_ignition(flavour)))):
        out[kind] = (parsed.other, [f.path for f in parsed.files])
    return out


def test_ntp_means_the_same_in_ignition_and_cloud_config(tmp_path: Path) -> None:
    flavour = Flavour("join", CONFIG, ntp=("ntp.example", "192.0.2.123"))
    for kind, (other, paths) in both_formats(flavour).items():
        assert other == {"ntp": {"enabled": True,
                                 "servers": ["ntp.example", "192.0.2.123"]}}, kind
        assert "/etc/ntp.conf" not in paths  # the time phase owns the time servers
        covered = config(tmp_path, {"time": {"servers": ["ntp.example", "192.0.2.123"]}})
        assert check_other_keys(other, covered, kind) == [
            f"{kind} {'ntp (ntpd.service and /etc/ntp.conf)' if kind == 'ignition' else 'ntp'}"
            ": delegated to the time phase (spec.time.servers holds every server it names)"]
        with pytest.raises(AgentError, match=r"servers 192\.0\.2\.123 are not in "
                                             r"spec\.time\.servers"):
            check_other_keys(other, config(tmp_path, {"time": {"servers": ["ntp.example"]}}),
                             kind)
    # enabled without servers: nothing to set up beyond what the time phase does
    for kind, (other, _) in both_formats(Flavour("join", CONFIG, ntp=())).items():
        assert check_other_keys(other, config(tmp_path, {}), kind)[0].endswith(
            "delegated to the time phase (spec.time.servers holds every server it names)")


def test_an_ntp_conf_beyond_cabpks_server_lines_is_refused_by_line() -> None:
    doc = json.loads(cabpk_ignition(Flavour("join", CONFIG, ntp=("ntp.example",))))
    entry = doc["storage"]["files"][-1]
    assert entry["path"] == "/etc/ntp.conf"
    entry["contents"]["source"] += "pool%20pool.example%20iburst%0A"
    with pytest.raises(AgentError, match=r"/etc/ntp.conf line 17: 'pool pool.example "
                                         r"iburst' is not CABPK's `server HOST`"):
        parse_ignition(json.dumps(doc))
