"""RBAC from the Role/ClusterRole/RoleBinding/ClusterRoleBinding objects in the store.

Rules match on verbs, apiGroups, resources (with subresources: `machines/status`,
`*/status`) and resourceNames, as the real authorizer does. Members of system:masters
bypass RBAC. Kubelets (`system:node:<name>` in `system:nodes`) are authorized as the
Node authorizer with NodeRestriction admission do for Node objects: read any Node,
register one, change only their own and its status (other node-scoped objects — pods,
secrets, leases — are not modelled). Simplified: no aggregated ClusterRoles;
non-resource URLs (discovery, /version, /healthz) are allowed to every caller; the default
ClusterRoles that every real cluster has are not created (bind what a test needs).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from .auth import User
from .store import Store

Obj = dict[str, Any]

RBAC = "rbac.authorization.k8s.io"


@dataclass(frozen=True)
class Attributes:
    verb: str
    group: str
    resource: str
    subresource: str
    namespace: str  # "" for cluster scope
    name: str

    def combined(self) -> str:
        return f"{self.resource}/{self.subresource}" if self.subresource else self.resource


@dataclass(frozen=True)
class Decision:
    allowed: bool
    reason: str = ""


def _matches(values: list[str], wanted: str) -> bool:
    return "*" in values or wanted in values


def _resource_matches(rule_resources: list[str], attrs: Attributes) -> bool:
    combined = attrs.combined()
    for r in rule_resources:
        if r in ("*", combined):
            return True
        if attrs.subresource and r == f"*/{attrs.subresource}":
            return True
    return False


def rule_allows(rule: Obj, attrs: Attributes) -> bool:
    if not _matches(rule.get("verbs") or [], attrs.verb):
        return False
    if not _matches(rule.get("apiGroups") or [], attrs.group):
        return False
    if not _resource_matches(rule.get("resources") or [], attrs):
        return False
    names = rule.get("resourceNames") or []
    return not names or attrs.name in names


def _subject_matches(subject: Obj, user: User, binding_ns: str) -> bool:
    kind = subject.get("kind")
    if kind == "User":
        return bool(subject.get("name") == user.name)
    if kind == "Group":
        return subject.get("name") in user.groups
    if kind == "ServiceAccount":
        ns = subject.get("namespace") or binding_ns
        return user.name == f"system:serviceaccount:{ns}:{subject.get('name')}"
    return False


# What every authenticated user may do on a real cluster: the default ClusterRoles
# system:basic-user, system:public-info-viewer, system:discovery and
# system:service-account-issuer-discovery, bound to system:authenticated (bootstrappolicy).
DEFAULT_RESOURCE_RULES: list[Obj] = [
    {"verbs": ["create"], "apiGroups": ["authorization.k8s.io"],
     "resources": ["selfsubjectaccessreviews", "selfsubjectrulesreviews"]},
    {"verbs": ["create"], "apiGroups": ["authentication.k8s.io"],
     "resources": ["selfsubjectreviews"]},
]
DEFAULT_NON_RESOURCE_RULES: list[Obj] = [
    {"verbs": ["get"], "nonResourceURLs": ["/healthz", "/livez", "/readyz", "/version",
                                           "/version/"]},
    {"verbs": ["get"], "nonResourceURLs": ["/.well-known", "/.well-known/*"]},
    {"verbs": ["get"], "nonResourceURLs": ["/api", "/api/*", "/apis", "/apis/*", "/healthz",
                                           "/livez", "/openapi", "/openapi/*", "/readyz",
                                           "/version", "/version/"]},
]


class Authorizer:
    def __init__(self, store: Store) -> None:
        self._store = store

    def rules_for(self, user: User, namespace: str) -> tuple[list[Obj], list[Obj]]:
        """(resource rules, non-resource rules) that apply to `user` in `namespace`, as a
        SelfSubjectRulesReview lists them: defaults first, then bound roles' rules."""
        if user.is_admin:
            return ([{"verbs": ["*"], "apiGroups": ["*"], "resources": ["*"]},
                     *DEFAULT_RESOURCE_RULES],
                    [{"verbs": ["*"], "nonResourceURLs": ["*"]}, *DEFAULT_NON_RESOURCE_RULES])
        resource = [dict(r) for r in DEFAULT_RESOURCE_RULES]
        non_resource = [dict(r) for r in DEFAULT_NON_RESOURCE_RULES]
        found: list[Obj] = []
        bindings, _ = self._store.list(f"{RBAC}/clusterrolebindings")
        for b in bindings:
            if any(_subject_matches(s, user, "") for s in b.get("subjects") or []):
                found += self._rules(b.get("roleRef") or {}, "")
        if namespace:
            bindings, _ = self._store.list(f"{RBAC}/rolebindings", namespace)
            for b in bindings:
                if any(_subject_matches(s, user, namespace) for s in b.get("subjects") or []):
                    found += self._rules(b.get("roleRef") or {}, namespace)
        for rule in found:
            if rule.get("nonResourceURLs"):
                non_resource.append({"verbs": rule.get("verbs") or [],
                                     "nonResourceURLs": rule["nonResourceURLs"]})
            else:
                out = {k: rule[k] for k in ("verbs", "apiGroups", "resources",
                                             "resourceNames") if rule.get(k)}
                resource.append(out)
        return resource, non_resource

    def _rules(self, role_ref: Obj, namespace: str, peek: bool = False) -> list[Obj]:
        """The rules of the role `role_ref` names: copies, or with `peek` the stored
        rules themselves (authorize only reads them, once per request)."""
        read = self._store.peek if peek else self._store.get
        kind = role_ref.get("kind")
        if kind == "ClusterRole":
            role = read(f"{RBAC}/clusterroles", "", role_ref.get("name", ""))
        elif kind == "Role":
            role = read(f"{RBAC}/roles", namespace, role_ref.get("name", ""))
        else:
            role = None
        return list((role or {}).get("rules") or [])

    def authorize(self, user: User, attrs: Attributes) -> Decision:
        if user.is_admin:
            return Decision(True, "system:masters")
        if _node_allows(user, attrs):
            return Decision(True, "Node authorizer")
        bindings, _ = self._store.view(f"{RBAC}/clusterrolebindings")
        for b in bindings:
            if any(_subject_matches(s, user, "") for s in b.get("subjects") or []) and any(
                    rule_allows(r, attrs)
                    for r in self._rules(b.get("roleRef") or {}, "", peek=True)):
                return Decision(True, _allowed_by("ClusterRoleBinding", b, user))
        if attrs.namespace:
            bindings, _ = self._store.view(f"{RBAC}/rolebindings", attrs.namespace)
            for b in bindings:
                if any(_subject_matches(s, user, attrs.namespace)
                       for s in b.get("subjects") or []) and any(
                        rule_allows(r, attrs)
                        for r in self._rules(b.get("roleRef") or {}, attrs.namespace,
                                          peek=True)):
                    return Decision(True, _allowed_by("RoleBinding", b, user))
        return Decision(False)


NODES = "system:nodes"
NODE_PREFIX = "system:node:"


def _node_allows(user: User, attrs: Attributes) -> bool:
    """plugin/pkg/auth/authorizer/rbac/bootstrappolicy/policy.go NodeRules for nodes,
    with plugin/pkg/admission/noderestriction's "only its own Node" on changes."""
    if NODES not in user.groups or not user.name.startswith(NODE_PREFIX) or attrs.group:
        return False
    own = attrs.name == user.name.removeprefix(NODE_PREFIX)
    if attrs.resource == "nodes" and not attrs.subresource:
        return attrs.verb in ("get", "list", "watch", "create") or (
            own and attrs.verb in ("update", "patch", "delete"))
    return attrs.resource == "nodes" and attrs.subresource == "status" and own and \
        attrs.verb in ("get", "update", "patch")


def _allowed_by(kind: str, binding: Obj, user: User) -> str:
    meta = binding.get("metadata", {})
    where = f"/{meta['namespace']}" if meta.get("namespace") else ""
    ref = binding.get("roleRef") or {}
    return (f'RBAC: allowed by {kind} "{meta.get("name")}{where}" of {ref.get("kind")} '
            f'"{ref.get("name")}" to User "{user.name}"')


def denial(user: User, attrs: Attributes) -> str:
    """The real authorizer's wording after `... is forbidden: `."""
    scope = (f'in the namespace "{attrs.namespace}"' if attrs.namespace
             else "at the cluster scope")
    return (f'User "{user.name}" cannot {attrs.verb} resource "{attrs.combined()}" '
            f'in API group "{attrs.group}" {scope}')
