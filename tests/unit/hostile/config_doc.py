"""A full, valid agent configuration, and loading it with one field replaced: what the
hostile-input tests feed the loader (the whole load, with the phases' and IPAM plugins'
checks, as `machine-agent` runs it)."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import yaml

from agent.config.sources import FileSource
from agent.host import Host
from agent.session import load

BASE: dict[str, Any] = {
    "apiVersion": "machine-agent.io/v1alpha1", "kind": "AgentConfig",
    "spec": {
        "identity": {"machine": {"namespace": "site-a", "name": "worker-0"},
                     "nodeName": "worker-0"},
        "management": {"server": "https://192.0.2.100:6443",
                       "tokenFile": "/etc/machine-agent/token",
                       "caFile": "/etc/machine-agent/ca.crt", "requestTimeout": "10s",
                       "bootstrapWait": "10m"},
        "network": {"hostname": "n1.example.net", "interfaces": [{
            "name": "eth0", "gateway": "192.0.2.1",
            "addresses": [{"static": "192.0.2.10/24"},
                          {"ipam": {"plugin": "capi", "pool": "workers", "family": "ipv6"}}],
            "routes": [{"to": "198.51.100.0/24", "via": "192.0.2.1"}]}],
            "dns": {"nameservers": ["192.0.2.53"], "search": ["example.net"]}},
        "ipam": {"plugins": {"capi": {"timeout": "60s", "apiVersion": "v1beta2", "pools": {
            "workers": {"name": "workers-v6", "kind": "InClusterIPPool"}}}}},
        "time": {"servers": [{"host": "ntp.example.net"}], "syncTimeout": "30s"},
        "join": {"timeout": "30s"},
        "retry": {"attempts": 5, "initialDelay": "1s", "maxDelay": "60s"},
        "lifecycle": {"onDelete": {"policy": "reset", "resetTimeout": "2m"},
                      "reconfigure": ["network"], "watch": True},
    }}


def load_with(tmp_path: Path, field: tuple[Any, ...], value: Any) -> None:
    """Load BASE with the value at `field` (a path of keys and indexes under spec)
    replaced."""
    doc = copy.deepcopy(BASE)
    parent = doc["spec"]
    for step in field[:-1]:
        parent = parent[step]
    parent[field[-1]] = value
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump(doc))
    load(Host(tmp_path / "root"), [FileSource(str(path), outside_root=True)])
