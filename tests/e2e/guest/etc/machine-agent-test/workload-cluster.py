"""Boot test only: the workload cluster of workload-apiserver.service, for the kubeadm
stand-in and the boot report. Run by the guest's python3 (PyYAML comes with cloud-init).

  world  once the API server has started (it writes admin.kubeconfig last), give the
         kubeadm stand-in's world file its CA and a token allowed to issue credentials
         (the CSR signer's part), as the sandbox does (sandbox/machine_agent_sandbox/cluster.py)
  nodes  print each Node as the cluster has it: name and Ready condition
"""

import json
import os
import ssl
import sys
import time
import urllib.request

import yaml

STATE = "/run/workload-apiserver"
WORLD = "/var/lib/kubeadm-standin/world.json"
WAIT = 150.0


def admin() -> tuple[str, str]:
    """The CA file and the admin token, once the server is up (bounded wait)."""
    kubeconfig = f"{STATE}/admin.kubeconfig"
    deadline = time.monotonic() + WAIT
    while not os.path.exists(kubeconfig):
        if time.monotonic() > deadline:
            sys.exit(f"{kubeconfig} did not appear within {WAIT:g}s")
        time.sleep(0.2)
    with open(kubeconfig) as f:
        return f"{STATE}/ca.crt", yaml.safe_load(f)["users"][0]["user"]["token"]


def world() -> None:
    ca, token = admin()
    with open(WORLD) as f:
        doc = json.load(f)
    doc["apiServer"] = {"ca": ca, "signerToken": token}
    with open(f"{WORLD}.tmp", "w") as f:
        json.dump(doc, f, indent=1)
    os.replace(f"{WORLD}.tmp", WORLD)


def nodes() -> None:
    ca, token = admin()
    request = urllib.request.Request("https://192.0.2.10:6443/api/v1/nodes",
                                     headers={"Authorization": f"Bearer {token}"})
    context = ssl.create_default_context(cafile=ca)
    with urllib.request.urlopen(request, timeout=10, context=context) as resp:
        items = json.load(resp)["items"]
    for node in items:
        ready = [c for c in node.get("status", {}).get("conditions", [])
                 if c["type"] == "Ready"]
        state = f"Ready={ready[0]['status']} {ready[0]['reason']}" if ready else "no Ready"
        print("workload Node:", node["metadata"]["name"], state)
    if not items:
        print("workload Node: none")


{"world": world, "nodes": nodes}[sys.argv[1]]()
