"""Bootstrap data is secret by default (issue 26 #8): a credential in a runcmd entry
(`curl -u admin:pw`) or in a write_files entry (client-key-data, AWS_SECRET_ACCESS_KEY)
reaches none of the journal, status.json, the Machine's conditions, its Events, the log
or `plan`; they show paths, sizes and digests. `plan --show-secrets`, asked for at the
node, shows them."""

from __future__ import annotations

import base64
import json
from collections.abc import Callable

import pytest
import yaml
from machine_agent_sandbox.sandbox import Sandbox

pytestmark = pytest.mark.allow_processes

SECRETS = ("pw-S3CR3T-4711", "S3CR3T-KEY-DATA-0815", "wJalrXUtnFEMI-S3CR3T-42")


def _hostile_bootstrap_data(box: Sandbox, name: str) -> None:
    path = f"/api/v1/namespaces/{box.admin.ns}/secrets/{name}-bootstrap"
    secret = box.admin.call("GET", path)
    text = base64.b64decode(secret["data"]["value"]).decode()
    header, _, body = text.partition("#cloud-config\n")
    doc = yaml.safe_load(body)
    doc["write_files"] += [
        {"path": "/etc/backup/kubeconfig", "permissions": "0600", "content": yaml.safe_dump(
            {"apiVersion": "v1", "kind": "Config", "users": [{"name": "u", "user": {
                "client-key-data": base64.b64encode(SECRETS[1].encode()).decode()
                + SECRETS[1]}}]})},
        {"path": "/etc/backup/aws.env", "permissions": "0600",
         "content": f"AWS_ACCESS_KEY_ID=AKIAEXAMPLE\nAWS_SECRET_ACCESS_KEY={SECRETS[2]}\n"}]
    doc["runcmd"].insert(0, f"curl -sS -u admin:{SECRETS[0]} http://127.0.0.1:9/backup")
    doc["runcmd"].insert(1, ["sh", "-c", f"exit 0 # {SECRETS[0]}"])
    value = header + "#cloud-config\n" + yaml.safe_dump(doc, sort_keys=False, width=10000)
    secret["data"]["value"] = base64.b64encode(value.encode()).decode()
    box.admin.call("PUT", path, secret)


def test_bootstrap_secrets_reach_no_output_unless_asked_for_locally(
        bring_up: Callable[[int], Sandbox]) -> None:
    box = bring_up(1)
    (node,) = box.nodes
    _hostile_bootstrap_data(box, node.name)
    code, plan = node.run("plan")
    assert code == 0, "\n".join(plan)
    shown = "\n".join(plan)
    assert "/etc/backup/aws.env" in shown and "sha256:" in shown
    assert not [s for s in SECRETS if s in shown], shown
    code, revealed = node.run("plan", "--show-secrets")
    assert code == 0 and all(s in "\n".join(revealed) for s in SECRETS[1:])
    assert f"admin:{SECRETS[0]}" in "\n".join(revealed)

    code, lines = node.run("--log-level", "debug", "run")
    assert code == 1, "\n".join(lines)  # the curl fails: CommandFailed, named by digest
    conditions = box.conditions(node)
    assert conditions["NodeJoined"]["reason"] == "CommandFailed"
    assert "runcmd[0] `sh -c <script: " in conditions["NodeJoined"]["message"]
    events = box.admin.call(
        "GET", f"/apis/events.k8s.io/v1/namespaces/{box.admin.ns}/events")["items"]
    outputs = {
        "log": "\n".join(lines),
        "journal": (node.root / "var/lib/machine-agent/journal.json").read_text(),
        "status.json": (node.root / "var/lib/machine-agent/status.json").read_text(),
        "conditions": json.dumps(box.admin.machine(node.name)),
        "events": json.dumps(events),
        "status --json": json.dumps(node.status()),
    }
    leaked = {where: [s for s in SECRETS if s in text] for where, text in outputs.items()}
    assert leaked == {where: [] for where in outputs}
    # the files themselves are written as given
    assert SECRETS[2] in (node.root / "etc/backup/aws.env").read_text()
