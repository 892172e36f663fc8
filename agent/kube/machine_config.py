"""The configuration a Machine's annotation `machine-agent.io/config` points at: the
ConfigMap or Secret it names (`ConfigRef`), read into a configuration source
(`ManagementSource`) above the node's own files."""

from __future__ import annotations

import base64
import hashlib
from collections.abc import Iterable
from typing import Any
from urllib.parse import quote

from agent.config.fragment import Fragment, parse_fragment
from agent.errors import FieldError, PermanentError, Reason
from agent.host import Host
from agent.kube.client import Object, resource_path
from agent.recordtype import record

CONFIG_ANNOTATION = "machine-agent.io/config"
CONFIG_KEY = "config.yaml"
LOCAL_ONLY = ("identity", "management")
"""Sections a management-cluster fragment may not set: they say how to reach it."""


def content_digest(text: str) -> str:
    """`config sha256:` and the first 12 hex digits of the text's SHA-256."""
    return f"config sha256:{hashlib.sha256(text.encode()).hexdigest()[:12]}"


@record(frozen=True)
class ManagementSource:
    """A config Source (agent.config.sources.chain) holding the text read from a ConfigMap or
    Secret, or the problem met reading it; its origin names the object."""

    origin: str
    text: str | None = None
    problem: str | None = None

    @property
    def label(self) -> str:
        """The origin with a digest of the text: which content a report is about (the
        in-place update extension waits for the one it wrote, agent/inplace)."""
        return f"{self.origin} ({content_digest(self.text)})" if self.text is not None \
            else self.origin

    def fragments(self, host: Host, errors: list[FieldError]) -> Iterable[Fragment]:
        if self.problem is not None:
            errors.append(FieldError("(object)", self.problem, origin=self.origin))
            return []
        fragment = parse_fragment(self.text or "", self.origin, errors)
        if fragment is None:
            return []
        spec = fragment.document.get("spec")
        for section in LOCAL_ONLY:
            if isinstance(spec, dict) and section in spec:
                errors.append(FieldError(
                    f"spec.{section}", "cannot come from the management cluster",
                    "set it in /etc/machine-agent/config.yaml on the node",
                    origin=self.origin))
        # Shared by the nodes of every image version the Machines run: keys of a newer
        # agent are warnings here (docs/version-skew.md).
        return [Fragment(fragment.origin, fragment.document, shared=True)]


@record(frozen=True)
class ConfigRef:
    """The ConfigMap or Secret a Machine's annotation names."""

    kind: str
    """configmap or secret"""
    namespace: str
    name: str
    machine: str

    @property
    def origin(self) -> str:
        return f"{self.kind} {self.namespace}/{self.name}"

    @property
    def collection_path(self) -> str:
        plural = "configmaps" if self.kind == "configmap" else "secrets"
        return resource_path("", "v1", plural, namespace=self.namespace)

    @property
    def object_path(self) -> str:
        return f"{self.collection_path}/{quote(self.name, safe='')}"

    def source(self, obj: Object | None) -> ManagementSource:
        """The configuration source `obj` (the object as read; None: missing) gives."""
        if obj is None:
            return ManagementSource(self.origin, problem=f"does not exist (named by the "
                                                         f"annotation {CONFIG_ANNOTATION} "
                                                         f"of Machine {self.namespace}/"
                                                         f"{self.machine})")
        data = obj.get("data") or {}
        if not isinstance(data, dict):
            return ManagementSource(self.origin, problem="data is not an object")
        if not isinstance(data.get(CONFIG_KEY, ""), str):
            return ManagementSource(self.origin, problem=f"data.{CONFIG_KEY} is not a string")
        if CONFIG_KEY not in data:
            return ManagementSource(self.origin, problem=f"has no key {CONFIG_KEY}")
        if self.kind == "configmap":
            return ManagementSource(self.origin, text=str(data[CONFIG_KEY]))
        try:
            return ManagementSource(self.origin, text=decode_base64(data[CONFIG_KEY], self.origin))
        except PermanentError as err:
            return ManagementSource(self.origin, problem=err.message)


def config_ref(namespace: str, machine: str,
               annotations: dict[str, Any]) -> ConfigRef | ManagementSource | None:
    """What the annotation names; a ManagementSource with the problem when it is
    malformed; None without the annotation."""
    ref = annotations.get(CONFIG_ANNOTATION)
    if ref is None:
        return None
    kind, _, name = str(ref).partition("/")
    kind = kind.lower()
    if kind not in ("configmap", "secret") or not name:
        return ManagementSource(
            f"machine {namespace}/{machine} annotation {CONFIG_ANNOTATION}",
            problem=f"{ref!r} is not configmap/NAME or secret/NAME")
    return ConfigRef(kind, namespace, name, machine)


def decode_base64(value: Any, what: str) -> str:
    try:
        return base64.b64decode(str(value or ""), validate=True).decode()
    except ValueError as err:  # binascii.Error, UnicodeDecodeError, non-ASCII text
        raise PermanentError(f"{what} is not base64 UTF-8 text",
                             reason=Reason.ConfigInvalid) from err
