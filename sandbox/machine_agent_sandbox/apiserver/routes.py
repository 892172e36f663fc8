"""From an HTTP method and path to what is asked (resource request or not), and the
minimal discovery documents (/api, /apis, /apis/GROUP[/VERSION], /version)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from . import discovery as docs
from . import status as st
from .resources import Registry, ResourceType

Obj = dict[str, Any]

_NOT_FOUND = st.ApiError(404, "NotFound", "the server could not find the requested resource",
                         {})



@dataclass
class Target:
    res: ResourceType
    version: str
    namespace: str
    name: str
    subresource: str
    verb: str

    @property
    def counted(self) -> str:
        return f"{self.res.plural}/{self.subresource}" if self.subresource else self.res.plural


def not_found() -> st.ApiError:
    """A path no handler serves: the real server's mux answers in plain text."""
    err = st.ApiError(_NOT_FOUND.code, _NOT_FOUND.reason, _NOT_FOUND.message, {})
    err.plain = True
    return err


def _verb(method: str, name: str, watch: bool) -> str:
    if method == "GET":
        if watch:
            return "watch"
        return "get" if name else "list"
    if method == "DELETE":
        return "delete" if name else "deletecollection"
    return {"POST": "create", "PUT": "update", "PATCH": "patch"}.get(method, "")


def resolve(registry: Registry, method: str, parts: list[str], watch: bool) -> Target | None:
    """Parts of a path under /api/v1 or /apis/G/V, to a resource target; None if it is
    not a resource path. Raises 404 for unknown resources."""
    if parts[0] == "api" and len(parts) >= 3:
        group, version, rest = "", parts[1], parts[2:]
    elif parts[0] == "apis" and len(parts) >= 4:
        group, version, rest = parts[1], parts[2], parts[3:]
    else:
        return None
    namespace = ""
    if (rest[0] == "namespaces" and len(rest) >= 3
            and not (len(rest) == 3 and rest[2] in ("status", "finalize"))):
        namespace, rest = rest[1], rest[2:]
    if len(rest) > 3:
        raise not_found()
    plural = rest[0]
    name = rest[1] if len(rest) > 1 else ""
    sub = rest[2] if len(rest) > 2 else ""
    res = registry.lookup(group, version, plural)
    if res is None:
        raise not_found()
    if namespace and not res.namespaced:
        raise not_found()
    if res.namespaced and not namespace and name:
        raise not_found()
    if sub and not ((sub == "status" and res.status_subresource)
                    or (sub == "token" and res.id == "/serviceaccounts")):
        # the resource's handler answers (as for a missing object), not the mux
        raise st.not_found(res.gr, res.group, res.plural, name)
    verb = _verb(method, name, watch)
    if not verb:
        raise st.method_not_allowed()
    return Target(res, version, namespace, name, sub, verb)


_VERBS = ["create", "delete", "get", "list", "patch", "update", "watch"]


def _resource_list(registry: Registry, group: str, version: str) -> Obj:
    resources: list[Obj] = []
    for rt in registry.all():
        if rt.group != group or version not in rt.versions:
            continue
        resources.append({"name": rt.plural, "singularName": rt.singular,
                          "namespaced": rt.namespaced, "kind": rt.kind, "verbs": _VERBS,
                          **({"shortNames": rt.short_names} if rt.short_names else {})})
        if rt.status_subresource:
            resources.append({"name": f"{rt.plural}/status", "singularName": "",
                              "namespaced": rt.namespaced, "kind": rt.kind,
                              "verbs": ["get", "patch", "update"]})
    if group == "authorization.k8s.io" and version == "v1":
        resources.append({"name": "selfsubjectaccessreviews", "singularName": "",
                          "namespaced": False, "kind": "SelfSubjectAccessReview",
                          "verbs": ["create"]})
    return {"kind": "APIResourceList", "apiVersion": "v1",
            "groupVersion": f"{group}/{version}" if group else version,
            "resources": resources}


def root_paths(registry: Registry) -> Obj:
    """GET /: the paths the server serves (genericapiserver's routes.Index), which Cluster
    API's ClusterCache reads to tell that a workload cluster's API is up."""
    paths = {"/api", "/api/v1", "/apis", "/healthz", "/livez", "/openapi/v3", "/readyz",
             "/version"}
    for group in docs.group_list(registry)["groups"]:
        paths.add(f"/apis/{group['name']}")
        paths.update(f"/apis/{v['groupVersion']}" for v in group["versions"])
    return {"paths": sorted(paths)}


def discovery(registry: Registry, parts: list[str], address: str) -> Obj | None:
    if not parts:
        return root_paths(registry)
    if parts == ["api"]:
        return {"kind": "APIVersions", "versions": ["v1"], "serverAddressByClientCIDRs": [
            {"clientCIDR": "0.0.0.0/0", "serverAddress": address}]}
    if parts == ["api", "v1"]:
        return _resource_list(registry, "", "v1")
    if parts == ["apis"]:
        return docs.group_list(registry)
    if len(parts) == 2 and parts[0] == "apis":
        return docs.group(registry, parts[1])
    if len(parts) == 3 and parts[0] == "apis":
        return docs.resource_list(registry, parts[1], parts[2])
    if parts == ["version"]:
        return docs.version()
    return None
