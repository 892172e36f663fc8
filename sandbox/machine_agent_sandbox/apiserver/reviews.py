"""Virtual create-only resources: SelfSubjectAccessReview (authorization.k8s.io/v1) and
the ServiceAccount `token` subresource (TokenRequest, authentication.k8s.io/v1)."""

from __future__ import annotations

import datetime
from typing import Any

from . import fields as fp
from . import meta as mt
from . import ssa
from . import status as st
from .auth import BoundTo, Tokens, User
from .rbac import Attributes, Authorizer
from .store import Store

Obj = dict[str, Any]


def _managed_fields(body: Obj, manager: str, api_version: str) -> list[Obj]:
    """The Update entry the real server's create records for a review it never stores
    (`spec` is a struct that always exists, its attributes a pointer that may not)."""
    entries = ssa.record_update([], fp.flatten({"spec": {}}, None, nodes=True),
                                fp.flatten({"spec": body.get("spec") or {}}, None, nodes=True),
                                manager, ssa.Scope("", False), api_version, mt.now())
    return ssa.dump(entries)


def self_subject_review(user: User) -> Obj:
    """authentication.k8s.io/v1 SelfSubjectReview: who the caller is."""
    info: Obj = {"username": user.name}
    if user.uid:
        info["uid"] = user.uid
    info["groups"] = list(user.groups)
    return {"kind": "SelfSubjectReview", "apiVersion": "authentication.k8s.io/v1",
            "metadata": {"creationTimestamp": mt.now()}, "status": {"userInfo": info}}


def self_subject_rules_review(authorizer: Authorizer, user: User, body: Any) -> Obj:
    """authorization.k8s.io/v1 SelfSubjectRulesReview for spec.namespace (which the real
    server does not echo back)."""
    namespace = str(((body or {}).get("spec") or {}).get("namespace", "")) \
        if isinstance(body, dict) else ""
    resource, non_resource = authorizer.rules_for(user, namespace)
    return {"kind": "SelfSubjectRulesReview", "apiVersion": "authorization.k8s.io/v1",
            "metadata": {}, "spec": {},
            "status": {"resourceRules": resource, "nonResourceRules": non_resource,
                       "incomplete": False}}


def self_subject_access_review(authorizer: Authorizer, user: User, body: Any,
                               manager: str = "") -> Obj:
    if not isinstance(body, dict) or not isinstance(body.get("spec"), dict):
        raise st.invalid_object("SelfSubjectAccessReview", "authorization.k8s.io", "", [
            st.FieldError("FieldValueInvalid", "spec.resourceAttributes",
                          "Invalid value: \"null\": exactly one of nonResourceAttributes or "
                          "resourceAttributes must be specified")])
    spec = body["spec"]
    meta: Obj = {"managedFields": _managed_fields(body, manager, "authorization.k8s.io/v1")} \
        if manager else {"creationTimestamp": None}
    out: Obj = {"kind": "SelfSubjectAccessReview", "apiVersion": "authorization.k8s.io/v1",
                "metadata": meta, "spec": spec}
    attrs = spec.get("resourceAttributes")
    if isinstance(attrs, dict):
        decision = authorizer.authorize(user, Attributes(
            verb=attrs.get("verb", ""), group=attrs.get("group", ""),
            resource=attrs.get("resource", ""), subresource=attrs.get("subresource", ""),
            namespace=attrs.get("namespace", ""), name=attrs.get("name", "")))
        out["status"] = {"allowed": decision.allowed}
        if decision.reason:
            out["status"]["reason"] = decision.reason
    else:
        out["status"] = {"allowed": True}  # non-resource URLs are open here
    return out


def token_request(store: Store, tokens: Tokens, namespace: str, name: str, body: Any) -> Obj:
    account = store.get("/serviceaccounts", namespace, name)
    if account is None:
        raise st.not_found("serviceaccounts", "", "serviceaccounts", name)
    spec = (body or {}).get("spec") or {} if isinstance(body, dict) else {}
    seconds = int(spec.get("expirationSeconds") or 3600)
    token = tokens.issue_bound(BoundTo(namespace, name, account["metadata"]["uid"]))
    expires = datetime.datetime.now(datetime.UTC) + datetime.timedelta(seconds=seconds)
    return {"kind": "TokenRequest", "apiVersion": "authentication.k8s.io/v1",
            "metadata": {"name": name, "namespace": namespace, "creationTimestamp": None},
            "spec": {"audiences": spec.get("audiences") or ["https://kubernetes.default.svc"],
                     "expirationSeconds": seconds, "boundObjectRef": spec.get("boundObjectRef")},
            "status": {"token": token,
                       "expirationTimestamp": expires.strftime("%Y-%m-%dT%H:%M:%SZ")}}
