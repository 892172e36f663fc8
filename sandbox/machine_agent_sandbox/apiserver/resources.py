"""The resource types the stand-in serves: custom resources from real CRD files, and the
built-in kinds it keeps without a schema (their unknown fields are preserved).

A custom resource is stored once, in its CRD's storage version. Other served versions
are answered by relabelling `apiVersion`: the stand-in has no conversion webhook, so it
assumes the versions agree on the fields a client uses (true for IPAM claims/addresses and
for Machine spec fields; NOT for Machine `status.conditions`, whose shape differs between
v1beta1 and v1beta2 — write and read Machines in v1beta2).
"""

from __future__ import annotations

import re
import threading
from dataclasses import dataclass, field
from functools import lru_cache
from importlib import resources as importlib_resources
from typing import Any

import yaml

from . import events

Obj = dict[str, Any]

CRD_PACKAGE = "machine_agent_sandbox.crds"


@dataclass
class ResourceType:
    group: str
    plural: str
    singular: str
    kind: str
    namespaced: bool
    versions: list[str]
    storage_version: str
    schemas: dict[str, Obj | None] = field(default_factory=dict)  # None: no schema
    status_subresource: bool = False
    deprecation: dict[str, str] = field(default_factory=dict)  # version -> warning text
    short_names: list[str] = field(default_factory=list)
    categories: list[str] = field(default_factory=list)
    printer_columns: dict[str, list[Obj]] = field(default_factory=dict)  # version -> columns
    track_generation: bool = False
    custom: bool = False
    stored_as: str = ""  # another type's id when both serve the same objects (Events)

    @property
    def id(self) -> str:
        return f"{self.group}/{self.plural}"

    @property
    def storage_id(self) -> str:
        return self.stored_as or self.id

    @property
    def gr(self) -> str:
        """group-qualified resource, as in messages: `machines.cluster.x-k8s.io`."""
        return f"{self.plural}.{self.group}" if self.group else self.plural

    @property
    def list_kind(self) -> str:
        return f"{self.kind}List"

    def api_version(self, version: str) -> str:
        return f"{self.group}/{version}" if self.group else version

    def schema(self, version: str) -> Obj | None:
        return self.schemas.get(version)


def _crd_to_type(crd: Obj) -> ResourceType:
    spec = crd["spec"]
    names = spec["names"]
    served = [v for v in spec["versions"] if v.get("served", True)]
    storage = next(v["name"] for v in spec["versions"] if v.get("storage"))
    rt = ResourceType(
        group=spec["group"], plural=names["plural"],
        singular=names.get("singular", names["kind"].lower()), kind=names["kind"],
        namespaced=spec.get("scope", "Namespaced") == "Namespaced",
        versions=[v["name"] for v in served], storage_version=storage,
        short_names=list(names.get("shortNames", [])), track_generation=True, custom=True,
        categories=list(names.get("categories", [])))
    for v in served:
        rt.schemas[v["name"]] = (v.get("schema") or {}).get("openAPIV3Schema") or {
            "type": "object", "x-kubernetes-preserve-unknown-fields": True}
        if v.get("additionalPrinterColumns"):
            rt.printer_columns[v["name"]] = list(v["additionalPrinterColumns"])
        if "status" in (v.get("subresources") or {}):
            rt.status_subresource = True
        if v.get("deprecated"):
            rt.deprecation[v["name"]] = v.get("deprecationWarning") or _default_deprecation(
                spec["group"], v["name"], names["kind"], served)
    return rt


def version_rank(version: str) -> tuple[int, int, int]:
    """Kubernetes' version order (v2 > v1 > v1beta2 > v1beta1 > v1alpha1 > other)."""
    match = re.fullmatch(r"v(\d+)(?:(alpha|beta)(\d+))?", version)
    if not match:
        return (-1, 0, 0)
    stage = {"alpha": 0, "beta": 1, None: 2}[match.group(2)]
    return (int(match.group(1)), stage, int(match.group(3) or 0))


def _default_deprecation(group: str, version: str, kind: str, served: list[Obj]) -> str:
    """apiextensions-apiserver's defaultDeprecationWarning: names the newest served,
    not deprecated, later version."""
    text = f"{group}/{version} {kind} is deprecated"
    newer = [v["name"] for v in served if not v.get("deprecated")
             and version_rank(v["name"]) > version_rank(version)]
    if newer:
        text += f"; use {group}/{max(newer, key=version_rank)} {kind}"
    return text


@lru_cache(maxsize=1)
def bundled_crds() -> tuple[Obj, ...]:
    """The CRD files, parsed once per process (schemas are only ever read)."""
    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    entries = sorted(importlib_resources.files(CRD_PACKAGE).iterdir(), key=lambda e: e.name)
    return tuple(yaml.load(e.read_text(), Loader=loader)
                 for e in entries if e.name.endswith(".yaml"))


# (group, version, plural, kind, namespaced, status subresource, generation)
_BUILTINS: list[tuple[str, str, str, str, bool, bool, bool]] = [
    ("", "v1", "namespaces", "Namespace", False, True, False),
    ("", "v1", "nodes", "Node", False, True, False),
    ("", "v1", "secrets", "Secret", True, False, False),
    ("", "v1", "configmaps", "ConfigMap", True, False, False),
    ("", "v1", "serviceaccounts", "ServiceAccount", True, False, False),
    ("", "v1", "events", "Event", True, False, False),
    ("", "v1", "services", "Service", True, True, False),
    ("", "v1", "endpoints", "Endpoints", True, False, False),
    ("", "v1", "pods", "Pod", True, True, False),
    ("events.k8s.io", "v1", "events", "Event", True, False, False),
    ("rbac.authorization.k8s.io", "v1", "roles", "Role", True, False, False),
    ("rbac.authorization.k8s.io", "v1", "rolebindings", "RoleBinding", True, False, False),
    ("rbac.authorization.k8s.io", "v1", "clusterroles", "ClusterRole", False, False, False),
    ("rbac.authorization.k8s.io", "v1", "clusterrolebindings", "ClusterRoleBinding", False,
     False, False),
    ("apps", "v1", "daemonsets", "DaemonSet", True, True, True),
    ("apps", "v1", "deployments", "Deployment", True, True, True),
    ("apps", "v1", "statefulsets", "StatefulSet", True, True, True),
    ("apps", "v1", "replicasets", "ReplicaSet", True, True, True),
    ("policy", "v1", "poddisruptionbudgets", "PodDisruptionBudget", True, True, True),
    ("coordination.k8s.io", "v1", "leases", "Lease", True, False, False),
    ("scheduling.k8s.io", "v1", "priorityclasses", "PriorityClass", False, False, False),
    ("storage.k8s.io", "v1", "volumeattachments", "VolumeAttachment", False, True, False),
    ("apiextensions.k8s.io", "v1", "customresourcedefinitions", "CustomResourceDefinition",
     False, True, True),
]

_SHORT = {"namespaces": ["ns"], "nodes": ["no"], "configmaps": ["cm"],
          "serviceaccounts": ["sa"], "services": ["svc"], "daemonsets": ["ds"],
          "deployments": ["deploy"], "customresourcedefinitions": ["crd", "crds"]}


# RoleRef is an atomic struct (k8s.io/api rbac/v1: +structType=atomic): one field to own
_BINDING_SCHEMA = {"type": "object", "x-kubernetes-preserve-unknown-fields": True,
                   "properties": {"roleRef": {"type": "object",
                                              "x-kubernetes-map-type": "atomic",
                                              "x-kubernetes-preserve-unknown-fields": True}}}
_BUILTIN_SCHEMAS = {("", "events"): events.CORE_SCHEMA,
                    ("events.k8s.io", "events"): events.EVENTS_SCHEMA,
                    ("rbac.authorization.k8s.io", "rolebindings"): _BINDING_SCHEMA,
                    ("rbac.authorization.k8s.io", "clusterrolebindings"): _BINDING_SCHEMA}


def _singular(kind: str) -> str:
    return kind.lower()


class Registry:
    """Looks resource types up by (group, version, plural) and by (group, kind)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._types: dict[str, ResourceType] = {}
        for group, version, plural, kind, namespaced, status, gen in _BUILTINS:
            self.add(ResourceType(
                group=group, plural=plural, singular=_singular(kind), kind=kind,
                namespaced=namespaced, versions=[version], storage_version=version,
                schemas={version: _BUILTIN_SCHEMAS.get((group, plural))},
                status_subresource=status, track_generation=gen,
                short_names=_SHORT.get(plural, []),
                stored_as="/events" if (group, plural) == ("events.k8s.io", "events") else ""))

    def add(self, rt: ResourceType) -> None:
        with self._lock:
            self._types[rt.id] = rt

    def add_crd(self, crd: Obj) -> ResourceType:
        rt = _crd_to_type(crd)
        self.add(rt)
        return rt

    def load_bundled_crds(self) -> list[ResourceType]:
        """Serve every CRD shipped in `sandbox/machine_agent_sandbox/crds/`."""
        return [self.add_crd(crd) for crd in bundled_crds()]

    def lookup(self, group: str, version: str, plural: str) -> ResourceType | None:
        with self._lock:
            rt = self._types.get(f"{group}/{plural}")
        return rt if rt is not None and version in rt.versions else None

    def by_id(self, res_id: str) -> ResourceType:
        with self._lock:
            return self._types[res_id]

    def by_kind(self, group: str, kind: str) -> ResourceType | None:
        with self._lock:
            return next((t for t in self._types.values()
                         if t.group == group and t.kind == kind), None)

    def all(self) -> list[ResourceType]:
        with self._lock:
            return list(self._types.values())

    def group_versions(self) -> dict[str, list[str]]:
        """group -> served versions, preferred (storage) version first."""
        out: dict[str, list[str]] = {}
        for rt in self.all():
            versions = out.setdefault(rt.group, [])
            for v in [rt.storage_version, *rt.versions]:
                if v not in versions:
                    versions.append(v)
        return out
