"""What each validity check of agent/config/checks.py says, in JSON Schema: the bounds,
formats and patterns `config schema` puts beside a field with that check, so an editor
refuses what `config validate` refuses. Patterns are ECMA-262 (what editors run), anchored.

A check with no entry here adds nothing: what the schema cannot say (a network's host bits,
fields that exclude each other, a pool that exists) stays with `config validate`.
Per JSON type, since a check may stand on a plain value, a list of them or a Duration.
"""

from __future__ import annotations

from typing import Any

from agent.config import checks
from agent.config.fields import Check

_LABEL = r"[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?"
_HOST = rf"{_LABEL}(\.{_LABEL})*"
HOST_NAME = rf"^(?=.{{1,253}}$){_HOST}\.?$"
_OCTET = r"(25[0-5]|2[0-4][0-9]|1[0-9][0-9]|[1-9]?[0-9])"
_V4 = rf"{_OCTET}(\.{_OCTET}){{3}}"
_V6 = r"[0-9A-Fa-f]{0,4}(:[0-9A-Fa-f]{0,4}){2,7}"
_V6_WITH_V4 = rf"[0-9A-Fa-f:]{{2,}}:{_V4}"
_ANY_V6 = rf"({_V6}|{_V6_WITH_V4})"
_IP_ADDRESS = {"anyOf": [
    {"format": "ipv4", "pattern": rf"^{_V4}$"},
    {"format": "ipv6", "pattern": rf"^{_ANY_V6}(%[A-Za-z0-9_.@-]{{1,15}})?$"}]}
_WITH_PREFIX = {"anyOf": [{"pattern": rf"^{_V4}/(3[0-2]|[12]?[0-9])$"},
                          {"pattern": rf"^{_ANY_V6}/(12[0-8]|1[01][0-9]|[1-9]?[0-9])$"}]}
POSITIVE_DURATION = r"^(?!\s*0*(\.0*)?\s*(ms|s|m|h)?\s*$)\s*\d+(\.\d+)?\s*(ms|s|m|h)?\s*$"


def _range(low: int, high: int) -> dict[str, dict[str, Any]]:
    return {"integer": {"minimum": low, "maximum": high}}


_NUMBER = "(0|[1-9][0-9]{0,3})"


def _string(**keywords: Any) -> dict[str, dict[str, Any]]:
    return {"string": keywords}


SCHEMAS: dict[Check, dict[str, dict[str, Any]]] = {
    checks.port: _range(1, 65535),
    checks.mtu: _range(68, 65535),
    checks.vlan_id: _range(1, 4094),
    checks.small_count: _range(0, 10),
    checks.route_table: {"integer": {"minimum": 1, "maximum": 2**32 - 1,
                                     "not": {"enum": [253, 255]}}},
    checks.positive: {"integer": {"exclusiveMinimum": 0}, "number": {"exclusiveMinimum": 0},
                      "string": {"pattern": POSITIVE_DURATION}},
    checks.host_name: _string(anyOf=[{"pattern": HOST_NAME}, *_IP_ADDRESS["anyOf"]]),
    checks.fqdn: _string(pattern=HOST_NAME),
    checks.ip_address: _string(**_IP_ADDRESS),
    checks.ip_interface: _string(**_WITH_PREFIX),
    checks.ip_network: _string(**_WITH_PREFIX),
    checks.interface_name: _string(
        pattern=r"^(?![0-9]+$)(?!\.\.?$)(?!all$)(?!default$)[A-Za-z0-9_.@-]{1,15}$"),
    checks.mac_address: _string(pattern=r"^[0-9A-Fa-f]{2}(:[0-9A-Fa-f]{2}){5}$"),
    checks.k8s_name: _string(maxLength=253, pattern=r"^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$"),
    checks.k8s_namespace: _string(maxLength=63, pattern=r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$"),
    checks.absolute_path: _string(pattern=r"^(?!.*/\.\.?(/|$))/[A-Za-z0-9._/@+:,=-]*$"),
    checks.https_url: _string(pattern=r"^https://[^\s/?#]+([/?#]\S*)?$"),
    checks.sha256: _string(pattern=r"^[0-9a-f]{64}$"),
    checks.k8s_release: _string(pattern=rf"^v{_NUMBER}\.{_NUMBER}\.{_NUMBER}$"),
    checks.host_port: _string(
        pattern=rf"^({_HOST}|\[[0-9A-Fa-f:.]+\]):"
                r"([1-9][0-9]{0,3}|[1-5][0-9]{4}|6[0-4][0-9]{3}|65[0-4][0-9]{2}|655[0-2][0-9]|6553[0-5])$"),
}


def constrained(prop: dict[str, Any], check: Check | None) -> dict[str, Any]:
    """`prop` (a field's schema) with what `check` says added where its type is met:
    the value itself, a list's items, or each alternative of a union."""
    by_type = SCHEMAS.get(check) if check is not None else None
    if not by_type:
        return prop
    return _apply(prop, by_type)


def _apply(prop: dict[str, Any], by_type: dict[str, dict[str, Any]]) -> dict[str, Any]:
    kind = prop.get("type")
    if kind == "array" and isinstance(prop.get("items"), dict):
        return {**prop, "items": _apply(prop["items"], by_type)}
    if "anyOf" in prop:
        return {**prop, "anyOf": [_apply(alt, by_type) for alt in prop["anyOf"]]}
    if isinstance(kind, str) and kind in by_type:
        return {**prop, **by_type[kind]}
    return prop
