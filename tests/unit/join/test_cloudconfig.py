"""CABPK cloud-config parsing: files with their encodings and modes, commands in order,
the kubeadm join entry taken over by the managed join; checked by cloud-init's own schema."""

from __future__ import annotations

import base64
import gzip
import subprocess
from pathlib import Path

import pytest
import yaml
from machine_agent_sandbox.testkit.bootstrap import cloud_config

from agent.errors import AgentError
from agent.phases.join.cloudconfig import (
    Command,
    KubeadmJoin,
    parse_cloud_config,
    secret_summary,
)

SECRET = b"-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n"


def doc(files: list[dict[str, object]], runcmd: list[object]) -> str:
    return "#cloud-config\n" + yaml.safe_dump({"write_files": files, "runcmd": runcmd})


JOIN = "kubeadm join --config /run/kubeadm/kubeadm-join-config.yaml"


def test_files_decode_each_encoding_with_mode_owner_and_append() -> None:
    parsed = parse_cloud_config(doc([
        {"path": "/etc/a.pem", "encoding": "b64", "content": base64.b64encode(SECRET).decode(),
         "permissions": "0600", "owner": "root:root"},
        {"path": "/etc/b.pem", "encoding": "gz+b64",
         "content": base64.b64encode(gzip.compress(SECRET)).decode(), "permissions": "0640"},
        {"path": "/etc/c.txt", "content": "plain\n", "append": True, "owner": "kube:adm"},
    ], [JOIN]), node_name="n")
    a, b, c = parsed.files
    assert a.content == SECRET and b.content == SECRET and c.content == b"plain\n"
    assert (a.mode, b.mode, c.mode) == (0o600, 0o640, 0o644)
    assert (a.owner, c.owner, c.append, a.append) == (("root", "root"), ("kube", "adm"),
                                                     True, False)


def test_runcmd_keeps_its_order_and_the_join_is_managed() -> None:
    parsed = parse_cloud_config(doc([], [
        "echo pre", ["systemctl", "restart", "containerd"],
        f"{JOIN} && echo success > /run/cluster-api/bootstrap-success.complete",
        "echo post"]), node_name="n")
    # shown: the program, and the size and digest of the rest (arguments may be secret)
    assert parsed.steps == [
        Command(("sh", "-c", "echo pre"), "sh -c <script: 8 bytes, sha256:b11fe3caedd0>",
                "echo pre"),
        Command(("systemctl", "restart", "containerd"),
                secret_summary("systemctl", ["restart", "containerd"]),
                "systemctl restart containerd"),
        KubeadmJoin("/run/kubeadm/kubeadm-join-config.yaml", (), True,
                    f"{JOIN} && echo success > /run/cluster-api/bootstrap-success.complete"),
        Command(("sh", "-c", "echo post"), secret_summary("sh -c", ["echo post"]),
                "echo post")]


@pytest.mark.parametrize("entry", [
    f"{JOIN} --token abcdef.0123456789abcdef",  # flags the managed join does not take
    f"{JOIN} && rm -rf /",  # anything but the sentinel after the join
    f"echo hi; {JOIN}",  # the join hidden inside other shell commands
    "kubeadm join 192.0.2.1:6443",  # no --config
])
def test_a_join_entry_the_agent_does_not_understand_is_refused(entry: str) -> None:
    with pytest.raises(AgentError) as info:
        parse_cloud_config(doc([], [entry]), node_name="n")
    assert info.value.reason == "ConfigInvalid"


def test_bad_files_are_refused_with_their_index() -> None:
    for files, what in (([{"path": "../etc/x", "content": ""}], "write_files[0].path"),
                        ([{"path": "/x", "content": "!!", "encoding": "b64"}], "write_files[0]"),
                        ([{"path": "/x", "permissions": "rw"}], "permissions"),
                        ([{"path": "/x", "encoding": "zstd"}], "unknown encoding")):
        with pytest.raises(AgentError) as info:
            parse_cloud_config(doc(files, [JOIN]), node_name="n")
        assert what in info.value.message


def test_unknown_template_variables_are_refused() -> None:
    text = "## template: jinja\n#cloud-config\nruncmd: ['echo {{ ds.meta_data.region }}']\n"
    with pytest.raises(AgentError, match=r"ds\.meta_data\.region"):
        parse_cloud_config(text, node_name="n")


@pytest.mark.allow_processes
def test_the_cabpk_shaped_bootstrap_data_passes_cloud_inits_own_schema(tmp_path: Path) -> None:
    # cloud-init's schema tool does not render jinja: give it the rendered document,
    # as cloud-init itself would see it after rendering.
    text = cloud_config("192.0.2.1:6443").replace("## template: jinja\n", "").replace(
        "{{ ds.meta_data.local_hostname }}", "worker-0")
    path = tmp_path / "user-data"
    path.write_text(text)
    done = subprocess.run(["cloud-init", "schema", "--config-file", str(path)],
                          capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "Valid" in done.stdout + done.stderr
    bad = tmp_path / "bad"
    bad.write_text("#cloud-config\nwrite_files: [{content: x}]\n")
    refused = subprocess.run(["cloud-init", "schema", "--config-file", str(bad)],
                             capture_output=True, text=True, timeout=120, check=False)
    assert refused.returncode != 0  # the tool does reject what is wrong


def jinja(body: str) -> str:
    return "## template: jinja\n#cloud-config\n" + body


def test_without_cloud_init_the_node_name_variables_come_from_the_machine() -> None:
    from agent.phases.join.template import render_cloud_config

    text = jinja("a: '{{ local_hostname }}'\nb: '{{ v1.local_hostname }}'\n"
                 "c: '{{ ds.meta_data.local_hostname }}'\n"
                 "{% if v1.region is defined %}d: x\n{% endif %}")
    assert render_cloud_config(text, None, "worker-0") == \
        "#cloud-config\na: 'worker-0'\nb: 'worker-0'\nc: 'worker-0'\n"


@pytest.mark.parametrize(("body", "node_name", "message"), [
    ("id: '{{ instance_id }}'\n", "worker-0",
     "the bootstrap data's jinja template uses 'instance_id', and this node has no "
     "cloud-init instance data (/run/cloud-init/instance-data.json) to answer it"),
    ("name: '{{ ds.meta_data.local_hostname }}'\n", None,
     "the bootstrap data's jinja template uses 'ds', and this node has no cloud-init"),
    ("a: {{ 'x' ~ '\\n' ~ 'runcmd: [reboot]' }}\n", "n",
     "the bootstrap data's jinja template puts a value with a line separator in the data"),
    ("a: {{ x \n", "n", "the bootstrap data's jinja template does not render: line 2: "),
    ("a: {{ ''.__class__ }}\n", "n", "the bootstrap data's jinja template uses '__class__'"),
])
def test_a_template_the_agent_cannot_answer_is_refused_naming_what(
        body: str, node_name: str | None, message: str) -> None:
    with pytest.raises(AgentError) as info:
        parse_cloud_config(jinja(body), node_name=node_name)
    assert str(info.value).startswith(message), str(info.value)
    assert "\n" not in str(info.value).split(" (")[0]


def test_a_template_kind_other_than_jinja_is_refused() -> None:
    with pytest.raises(AgentError, match="the bootstrap data is a 'basic' template"):
        parse_cloud_config("## template: basic\n#cloud-config\n", node_name="n")


@pytest.mark.parametrize(("entry", "message"), [
    ({"source": {"uri": "https://192.0.2.1/f"}},
     r"write_files\[0\].source: the agent fetches no file contents from a URL"),
    ({"content": "x", "owner_id": 0}, r"write_files\[0\].owner_id: not a write_files key"),
    ({"content": "x", "defer": "yes"}, r"write_files\[0\].defer: 'yes' is not true or false"),
    ({"content": "x", "append": "false"},
     r"write_files\[0\].append: 'false' is not true or false"),
])
def test_a_write_files_key_the_agent_does_not_carry_out_is_refused_by_name(
        entry: dict[str, object], message: str) -> None:
    with pytest.raises(AgentError, match=message):
        parse_cloud_config(doc([{"path": "/etc/x", **entry}], [JOIN]), node_name="n")


def test_deferred_files_are_written_after_the_others_and_before_runcmd() -> None:
    # cloud-init: write-files-deferred runs in the final stage, before scripts-user runs
    # the runcmd script
    parsed = parse_cloud_config(doc([
        {"path": "/etc/late", "content": "late", "defer": True},
        {"path": "/etc/early", "content": "early", "defer": False},
        {"path": "/etc/plain", "content": "plain"}], [JOIN]), node_name="n")
    assert [f.path for f in parsed.files] == ["/etc/early", "/etc/plain", "/etc/late"]
