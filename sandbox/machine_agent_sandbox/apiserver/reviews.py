"""Virtual create-only resources: SelfSubjectAccessReview (authorization.k8s.io/v1) and
the ServiceAccount `token` subresource (TokenRequest, authentication.k8s.io/v1)."""

from __future__ import annotations

import datetime
from typing import Any

from . import status as st
from .auth import Tokens, User, service_account_user
from .rbac import Attributes, Authorizer
from .store import Store

Obj = dict[str, Any]


def self_subject_access_review(authorizer: Authorizer, user: User, body: Any) -> Obj:
    if not isinstance(body, dict) or not isinstance(body.get("spec"), dict):
        raise st.invalid_object("SelfSubjectAccessReview", "authorization.k8s.io", "", [
            st.FieldError("FieldValueInvalid", "spec.resourceAttributes",
                          "Invalid value: \"null\": exactly one of nonResourceAttributes or "
                          "resourceAttributes must be specified")])
    spec = body["spec"]
    out: Obj = {"kind": "SelfSubjectAccessReview", "apiVersion": "authorization.k8s.io/v1",
                "metadata": {"creationTimestamp": None}, "spec": spec}
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
    if store.get("/serviceaccounts", namespace, name) is None:
        raise st.not_found("serviceaccounts", "", "serviceaccounts", name)
    spec = (body or {}).get("spec") or {} if isinstance(body, dict) else {}
    seconds = int(spec.get("expirationSeconds") or 3600)
    token = tokens.issue_for(service_account_user(namespace, name))
    expires = datetime.datetime.now(datetime.UTC) + datetime.timedelta(seconds=seconds)
    return {"kind": "TokenRequest", "apiVersion": "authentication.k8s.io/v1",
            "metadata": {"name": name, "namespace": namespace, "creationTimestamp": None},
            "spec": {"audiences": spec.get("audiences") or ["https://kubernetes.default.svc"],
                     "expirationSeconds": seconds, "boundObjectRef": spec.get("boundObjectRef")},
            "status": {"token": token,
                       "expirationTimestamp": expires.strftime("%Y-%m-%dT%H:%M:%SZ")}}
