"""Label selectors (`a=b,c,!d,e in (x,y)`) and field selectors (metadata.name/namespace)."""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

from .status import ApiError, bad_request

Obj = dict[str, Any]
Predicate = Callable[[Obj], bool]

_SET_RE = re.compile(r"^\s*(!?)\s*([^\s!=(),]+)\s*(?:(in|notin)\s*\(([^)]*)\))?\s*$")
_CMP_RE = re.compile(r"^\s*([^\s!=(),]+)\s*(==|=|!=)\s*([^\s!=(),]*)\s*$")


def _split_terms(selector: str) -> list[str]:
    terms, depth, cur = [], 0, ""
    for ch in selector:
        if ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
        if ch == "," and depth == 0:
            terms.append(cur)
            cur = ""
        else:
            cur += ch
    terms.append(cur)
    return [t for t in terms if t.strip()]


def label_selector(selector: str) -> Predicate:
    tests: list[Predicate] = []
    for term in _split_terms(selector):
        tests.append(_label_term(term))
    return lambda obj: all(t((obj.get("metadata") or {}).get("labels") or {}) for t in tests)


def _label_term(term: str) -> Predicate:
    lead = term.lstrip()
    for token in ("==", "!=", "=", "(", ")", ","):
        if lead.startswith(token):
            # apimachinery's label parser wants a key (or `!`) first
            raise bad_request(f"found '{token}', expected: !, identifier, or 'end of string'")
    m = _CMP_RE.match(term)
    if m:
        key, op, value = m.groups()
        if op == "!=":
            return lambda labels: labels.get(key) != value
        return lambda labels: labels.get(key) == value
    m = _SET_RE.match(term)
    if m:
        neg, key, op, values = m.groups()
        if op is None:
            if neg:
                return lambda labels: key not in labels
            return lambda labels: key in labels
        if not neg:
            choices = {v.strip() for v in values.split(",") if v.strip()}
            if op == "in":
                return lambda labels: labels.get(key) in choices
            return lambda labels: labels.get(key) not in choices
    raise bad_request(f"unable to parse requirement: found '{term.strip()}', expected: "
                      "',', '!=', '==', '=', 'in', 'notin'")


_FIELDS: dict[str, tuple[str, ...]] = {"metadata.name": ("metadata", "name"),
                                       "metadata.namespace": ("metadata", "namespace")}
_TYPE_FIELDS: dict[str, dict[str, tuple[str, ...]]] = {
    "/pods": {"spec.nodeName": ("spec", "nodeName"), "status.phase": ("status", "phase")},
    "/secrets": {"type": ("type",)},
}
"""Fields a type adds to the selectable ones (kube-apiserver's per-type GetAttrs: the
Pod's spec.nodeName is what `kubectl drain`, and Cluster API's drain, list by)."""


def field_selector(selector: str, resource: str = "") -> Predicate:
    tests: list[Predicate] = []
    for term in _split_terms(selector):
        m = _CMP_RE.match(term)
        if not m:
            raise bad_request(f"invalid selector: '{selector}'; can't understand '{term}'")
        key, op, value = m.groups()
        known = {**_FIELDS, **_TYPE_FIELDS.get(resource, {})}
        if key not in known:
            raise ApiError(400, "BadRequest", f'field label not supported: {key}')
        path = known[key]

        def test(obj: Obj, path: tuple[str, ...] = path, op: str = op,
                 value: str = value) -> bool:
            actual: Any = obj
            for step in path:
                actual = actual.get(step) if isinstance(actual, dict) else None
            actual = "" if actual is None else str(actual)
            return bool(actual != value) if op == "!=" else bool(actual == value)

        tests.append(test)
    return lambda obj: all(t(obj) for t in tests)


def selector_from_query(query: dict[str, str], resource: str = "") -> Predicate:
    """The label and field selectors of a list or watch of `resource` (group/plural)."""
    tests: list[Predicate] = []
    if query.get("labelSelector"):
        tests.append(label_selector(query["labelSelector"]))
    if query.get("fieldSelector"):
        tests.append(field_selector(query["fieldSelector"], resource))
    return lambda obj: all(t(obj) for t in tests)
