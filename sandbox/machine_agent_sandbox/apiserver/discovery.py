"""Discovery as kube-apiserver v1.36 serves it: /version, /apis (the built-in groups of
a real v1.36 server, then the CRD groups), /apis/GROUP, /apis/GROUP/VERSION, aggregated
discovery (apidiscovery.k8s.io/v2) and the /openapi/v3 index.

The built-in groups and their resources are the real server's own answer
(builtin-discovery.json, recorded from kube-apiserver v1.36.2): the stand-in advertises
every built-in kind a real server has, though it serves only those resources.py lists
(the others answer 404 page not found). CRD groups are built from the CRDs as the
apiextensions and aggregator code does (verbs in their order, categories,
storageVersionHash, APIService order).
"""

from __future__ import annotations

import base64
import hashlib
import json
from functools import lru_cache
from importlib import resources as importlib_resources
from typing import Any

from .resources import Registry, ResourceType, version_rank

Obj = dict[str, Any]

AGGREGATED = "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList"
_CRD_VERBS = ["delete", "deletecollection", "get", "list", "patch", "create", "update", "watch"]
_STATUS_VERBS = ["get", "patch", "update"]
# built-in kinds stored under another group/version than they are served at
_STORED_AS = {("events.k8s.io", "v1", "Event"): ("", "v1", "Event")}


@lru_cache(maxsize=1)
def _builtin() -> Obj:
    text = importlib_resources.files(__package__).joinpath("builtin-discovery.json").read_text()
    data: Obj = json.loads(text)
    return data


def version() -> Obj:
    return dict(_builtin()["version"])


def storage_version_hash(group: str, version: str, kind: str) -> str:
    """apiserver's discovery.StorageVersionHash of the stored group/version/kind."""
    group, version, kind = _STORED_AS.get((group, version, kind), (group, version, kind))
    digest = hashlib.sha256(f"{group}/{version}/{kind}".encode()).digest()
    return base64.b64encode(digest[:8]).decode()


def _crd_groups(registry: Registry) -> dict[str, list[ResourceType]]:
    """Custom resource groups in the aggregator's order: APIServices named
    VERSION.GROUP, all of the same priority, sorted by name."""
    types = [t for t in registry.all() if t.custom]
    names = sorted(f"{v}.{t.group}" for t in types for v in t.versions)
    order = list(dict.fromkeys(n.split(".", 1)[1] for n in names))
    return {g: sorted((t for t in types if t.group == g), key=lambda t: t.plural)
            for g in order}


def _crd_versions(types: list[ResourceType]) -> list[str]:
    versions = {v for t in types for v in t.versions}
    return sorted(versions, key=version_rank, reverse=True)


def _group_doc(name: str, versions: list[str]) -> Obj:
    gvs = [{"groupVersion": f"{name}/{v}", "version": v} for v in versions]
    return {"name": name, "versions": gvs, "preferredVersion": gvs[0]}


def groups(registry: Registry) -> list[Obj]:
    out = [_group_doc(item["metadata"]["name"], [v["version"] for v in item["versions"]])
           for item in _builtin()["items"]]
    out += [_group_doc(g, _crd_versions(types)) for g, types in _crd_groups(registry).items()]
    return out


def group_list(registry: Registry) -> Obj:
    return {"kind": "APIGroupList", "apiVersion": "v1", "groups": groups(registry)}


def group(registry: Registry, name: str) -> Obj | None:
    found = next((g for g in groups(registry) if g["name"] == name), None)
    return {"kind": "APIGroup", "apiVersion": "v1", **found} if found else None


def _crd_resources(types: list[ResourceType], version: str) -> list[Obj]:
    """Aggregated-discovery entries of the CRDs of a group at one version."""
    out = []
    for t in types:
        if version not in t.versions:
            continue
        kind = {"group": t.group, "version": version, "kind": t.kind}
        entry: Obj = {"resource": t.plural, "responseKind": kind,
                      "scope": "Namespaced" if t.namespaced else "Cluster",
                      "singularResource": t.singular, "verbs": list(_CRD_VERBS)}
        if t.short_names:
            entry["shortNames"] = list(t.short_names)
        if t.categories:
            entry["categories"] = list(t.categories)
        if t.status_subresource:
            entry["subresources"] = [{"subresource": "status", "responseKind": kind,
                                      "verbs": list(_STATUS_VERBS)}]
        out.append(entry)
    return out


def aggregated(registry: Registry) -> Obj:
    items = list(_builtin()["items"])
    # the aggregated document lists the CRD groups by name (unlike /apis)
    for g, types in sorted(_crd_groups(registry).items()):
        items.append({"metadata": {"name": g}, "versions": [
            {"version": v, "resources": _crd_resources(types, v), "freshness": "Current"}
            for v in _crd_versions(types)]})
    return {"kind": "APIGroupDiscoveryList", "apiVersion": "apidiscovery.k8s.io/v2",
            "metadata": {}, "items": items}


def _to_v1(entry: Obj, group_name: str, version_name: str, storage_hash: bool) -> list[Obj]:
    """An aggregated-discovery resource as APIResourceList entries (itself, then its
    subresources)."""
    kind = entry["responseKind"]["kind"]
    out: Obj = {"name": entry["resource"], "singularName": entry.get("singularResource", ""),
                "namespaced": entry["scope"] == "Namespaced", "kind": kind,
                "verbs": entry["verbs"]}
    for key in ("shortNames", "categories"):
        if entry.get(key):
            out[key] = entry[key]
    if storage_hash:
        out["storageVersionHash"] = storage_version_hash(group_name, version_name, kind)
    docs = [out]
    for sub in entry.get("subresources") or []:
        doc: Obj = {"name": f"{entry['resource']}/{sub['subresource']}", "singularName": "",
                    "namespaced": out["namespaced"],
                    "kind": (sub.get("responseKind") or {}).get("kind", ""),
                    "verbs": sub.get("verbs") or []}
        rk = sub.get("responseKind") or {}
        if rk.get("group") and rk["group"] != group_name:  # e.g. deployments/scale
            doc["group"] = rk["group"]
        if rk.get("version") and (rk["version"] != version_name or "group" in doc):
            doc["version"] = rk["version"]
        docs.append(doc)
    return docs


def resource_list(registry: Registry, group_name: str, version_name: str) -> Obj | None:
    found: list[Obj] | None = None
    for item in _builtin()["items"]:
        if item["metadata"]["name"] == group_name:
            for v in item["versions"]:
                if v["version"] == version_name:
                    found = [d for r in v["resources"]
                             for d in _to_v1(r, group_name, version_name, True)]
    types = _crd_groups(registry).get(group_name)
    if found is None and types and version_name in _crd_versions(types):
        found = []
        for t in types:
            for r in _crd_resources([t], version_name):
                docs = _to_v1(r, group_name, version_name, False)
                docs[0]["storageVersionHash"] = storage_version_hash(
                    group_name, t.storage_version, t.kind)  # the stored version's
                found += docs
    if found is None:
        return None
    return {"kind": "APIResourceList", "apiVersion": "v1",
            "groupVersion": f"{group_name}/{version_name}", "resources": found}


# --- /openapi/v3 -----------------------------------------------------------------------


def _openapi_paths(registry: Registry) -> list[str]:
    paths = [".well-known/openid-configuration", "api", "api/v1", "apis", "openid/v1/jwks",
             "version"]
    for item in _builtin()["items"]:
        name = item["metadata"]["name"]
        paths.append(f"apis/{name}")
        paths += [f"apis/{name}/{v['version']}" for v in item["versions"]]
    for g, types in _crd_groups(registry).items():
        paths += [f"apis/{g}/{v}" for v in _crd_versions(types)]  # no group-level entry
    return sorted(paths)


def openapi_document(registry: Registry, path: str) -> Obj | None:
    """The OpenAPI v3 document of one path: for a CRD group-version its schemas; for the
    rest an empty document (the stand-in does not carry the built-in kinds' schemas)."""
    if path not in _openapi_paths(registry):
        return None
    schemas: Obj = {}
    parts = path.split("/")
    if len(parts) == 3 and parts[0] == "apis":
        for t in _crd_groups(registry).get(parts[1], []):
            if parts[2] in t.versions and t.schema(parts[2]) is not None:
                schemas[f"{t.group}.{parts[2]}.{t.kind}"] = t.schema(parts[2])
    return {"openapi": "3.0.0", "info": {"title": "Kubernetes", "version": "v1.36.2"},
            "paths": {}, "components": {"schemas": schemas}}


def openapi_index(registry: Registry) -> Obj:
    """/openapi/v3: each path with the hash of its document, as the real index links it."""
    out: Obj = {}
    for path in _openapi_paths(registry):
        doc = json.dumps(openapi_document(registry, path), sort_keys=True).encode()
        digest = hashlib.sha512(doc).hexdigest().upper()
        out[path] = {"serverRelativeURL": f"/openapi/v3/{path}?hash={digest}"}
    return {"paths": out}
