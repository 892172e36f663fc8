"""The Machine as a source: who this node is, its Cluster, its bootstrap data, and the
configuration its annotation points at.

Identity is either named (`spec.identity.machine`) or discovered: the one Machine whose
label `machine-agent.io/host-uuid` equals this host's DMI product UUID (lower case), or
whose `spec.providerID` matches `spec.identity.discovery.providerIDPattern`. Machines are
read as `cluster.x-k8s.io/v1beta2`, falling back to `v1beta1` on a management cluster
that does not serve it yet.

A bootstrap run needs four requests: the Machine, its Cluster, the bootstrap Secret and
the config ConfigMap; waiting (for `dataSecretName`, for the Secret) uses list + watch.
"""

from __future__ import annotations

import logging
import re
import time
from collections.abc import Callable
from typing import Any, TypeVar

from agent import dmi
from agent.config import checks
from agent.config.identity import IdentitySpec
from agent.errors import PermanentError, Reason, TemporaryError
from agent.host import Host
from agent.kube.claims import UID
from agent.kube.client import Client, Object, resource_path
from agent.kube.errors import NotFound
from agent.kube.facts import CONTROL_PLANE_LABEL, MachineFacts
from agent.kube.machine_config import ConfigRef, ManagementSource, config_ref, decode_base64
from agent.kube.watch import WaitTimedOut, Watcher
from agent.logs import REDACT
from agent.recordtype import record

log = logging.getLogger(__name__)
T = TypeVar("T")

GROUP = "cluster.x-k8s.io"
VERSIONS = ("v1beta2", "v1beta1")
"""Preferred first: v1beta2 is the storage version; v1beta1 is deprecated."""
@record(frozen=True)
class MachineView:
    """The Machine as read: facts for the phases, and what the reporter needs."""

    facts: MachineFacts
    version: str
    """The API version the Machine was read with (`v1beta2` or `v1beta1`)."""
    generation: int
    config: ManagementSource | None
    """The configuration the Machine's annotation points at, if any."""
    deletion_timestamp: str | None = None
    """Set when the Machine is being deleted (CAPI drains it, held by finalizers)."""
    config_ref: ConfigRef | None = None
    """The ConfigMap or Secret its annotation names (the daemon watches it)."""

    @property
    def status_path(self) -> str:
        return resource_path(GROUP, self.version, "machines", namespace=self.facts.namespace,
                             name=self.facts.name, subresource="status")


class MachineInvalid(PermanentError):
    """An object the Machine source reads does not have the shape its API gives it (a
    hand-made or corrupted object): refused naming the object and the field, never read
    on into a traceback."""

    reason = Reason.MachineInvalid


class _Shape:
    """Typed reads of one object's fields by their path from the object's root; a field
    (or a parent) of another type is MachineInvalid naming `where` (`Machine ns/name`)
    and the path. Absent or null optional fields read as empty."""

    def __init__(self, where: str, root: Any) -> None:
        self.where = where
        self.root = root

    def refuse(self, path: str, problem: str) -> MachineInvalid:
        return MachineInvalid(f"{self.where}: {path} {problem}",
                              hint="correct that field: it is not the shape its API gives it")

    def _get(self, path: str) -> Any:
        value: Any = self.root
        walked: list[str] = []
        for step in path.split("."):
            if value is None:
                return None
            if not isinstance(value, dict):
                raise self.refuse(".".join(walked), "is not an object")
            walked.append(step)
            value = value.get(step)
        return value

    def obj(self, path: str, *, required: bool = False) -> dict[str, Any]:
        value = self._get(path)
        if value is None and not required:
            return {}
        if not isinstance(value, dict):
            raise self.refuse(path, "is not an object")
        return value

    def text(self, path: str, *, required: bool = False) -> str | None:
        value = self._get(path)
        if value is None and not required:
            return None
        if not isinstance(value, str) or (required and not value):
            raise self.refuse(path, "is not a non-empty string" if required
                              else "is not a string")
        return value

    def name(self, path: str) -> str | None:
        """The name of another object (it goes into a request's path)."""
        value = self.text(path)
        if value and (problem := checks.k8s_name(value)) is not None:
            raise self.refuse(path, f"is wrong: {problem}")
        return value

    def integer(self, path: str, low: int, high: int) -> int | None:
        value = self._get(path)
        if value is None:
            return None
        if isinstance(value, bool) or not isinstance(value, int) or \
                not low <= value <= high:
            raise self.refuse(path, f"is not an integer from {low} to {high}")
        return value

    def strings(self, path: str) -> dict[str, str]:
        """A map of strings (labels, annotations, a Secret's data)."""
        value = self.obj(path)
        for key, item in value.items():
            if not isinstance(item, str):
                raise self.refuse(f"{path}[{key!r}]", "is not a string")
        return value

    def items(self, path: str) -> list[Any]:
        value = self._get(path)
        if value is None:
            return []
        if not isinstance(value, list):
            raise self.refuse(path, "is not a list")
        return value


@record(frozen=True)
class MachineShape:
    """The fields of a Machine the agent reads, checked."""

    namespace: str
    name: str
    uid: str
    generation: int
    labels: dict[str, str]
    annotations: dict[str, str]
    deletion_timestamp: str | None
    secret_name: str | None
    cluster_name: str
    version: str | None
    provider_id: str | None


def machine_shape(machine: Any) -> MachineShape:
    """The Machine's fields the agent reads; MachineInvalid naming the first one of the
    wrong shape."""
    unnamed = _Shape("a Machine", machine)
    if not isinstance(machine, dict):
        raise unnamed.refuse("(object)", "is not an object")
    namespace = unnamed.text("metadata.namespace", required=True) or ""
    name = unnamed.text("metadata.name", required=True) or ""
    shape = _Shape(f"Machine {namespace}/{name}", machine)
    shape.obj("spec", required=True)
    uid = shape.text("metadata.uid") or ""
    if uid and not UID.fullmatch(uid):
        raise shape.refuse("metadata.uid", "is not an object UID (letters, digits, '-')")
    return MachineShape(
        namespace=namespace, name=name, uid=uid,
        generation=shape.integer("metadata.generation", 0, 2**63 - 1) or 0,
        labels=shape.strings("metadata.labels"),
        annotations=shape.strings("metadata.annotations"),
        deletion_timestamp=shape.text("metadata.deletionTimestamp"),
        secret_name=shape.name("spec.bootstrap.dataSecretName") or None,
        cluster_name=shape.name("spec.clusterName") or "",
        version=shape.text("spec.version"),
        provider_id=shape.text("spec.providerID"))


class BootstrapDataMissing(TemporaryError):
    """The bootstrap data did not appear within spec.management.bootstrapWait."""

    reason = Reason.BootstrapDataMissing


def _missing(what: str, wait: float) -> BootstrapDataMissing:
    return BootstrapDataMissing(
        f"{what} did not appear within spec.management.bootstrapWait ({wait:g}s)",
        hint="the bootstrap provider writes it once the Machine's bootstrap config is "
             "ready (CABPK: check the Machine's KubeadmConfig and the controller's logs)")


class MachineReader:
    """Reads the Machine and what it points at, in as few requests as possible.

    The wait for the bootstrap data is bounded by `wait` from the first `read`: a read
    retried after a failure does not start the wait over."""

    def __init__(self, client: Client, host: Host, *, wait: float,
                 progress: Callable[[str], None] = lambda message: None,
                 monotonic: Callable[[], float] = time.monotonic) -> None:
        self.client = client
        self.host = host
        self.wait = wait
        self.progress = progress
        self.monotonic = monotonic
        self._deadline: float | None = None

    def read(self, identity: IdentitySpec) -> MachineView:
        if self._deadline is None:
            self._deadline = self.monotonic() + self.wait
        deadline = self._deadline
        version, machine = self._find(identity)
        meta = spec = machine_shape(machine)
        namespace, name = meta.namespace, meta.name
        log.info("this node is Machine %s/%s (read as %s/%s)", namespace, name, GROUP,
                 version)
        if not spec.secret_name and self.wait > 0:
            spec = machine_shape(self._wait_for_secret_name(version, namespace, name,
                                                            deadline))
        endpoint, initialized = self._cluster(version, namespace, spec.cluster_name)
        data, fmt = (self._bootstrap_data(namespace, spec.secret_name, deadline)
                     if spec.secret_name else (None, None))
        facts = MachineFacts(
            namespace=namespace, name=name, uid=meta.uid, cluster_name=spec.cluster_name,
            kubernetes_version=spec.version, control_plane_endpoint=endpoint,
            bootstrap_format=fmt, bootstrap_data=data, provider_id=spec.provider_id,
            control_plane=CONTROL_PLANE_LABEL in meta.labels,
            control_plane_initialized=initialized, api_version=version)
        ref = config_ref(namespace, name, meta.annotations)
        return MachineView(facts, version, meta.generation, self._config_source(ref),
                           meta.deletion_timestamp,
                           ref if isinstance(ref, ConfigRef) else None)

    # -- identity ---------------------------------------------------------------------

    def _find(self, identity: IdentitySpec) -> tuple[str, Object]:
        """The Machine and the version it was read with; MachineNotFound otherwise."""
        if identity.machine is not None:
            ref = identity.machine
            return self._first_version(lambda v: self.client.get(resource_path(
                GROUP, v, "machines", namespace=ref.namespace, name=ref.name)),
                f"Machine {ref.namespace}/{ref.name}")
        discovery = identity.discovery
        host_uuid = dmi.product_uuid(self.host)
        if discovery.provider_id_pattern is not None:
            pattern = re.compile(discovery.provider_id_pattern.replace(
                "{uuid}", re.escape(host_uuid)))
            selector = None
            wanted = f"spec.providerID matching {pattern.pattern!r}"
        else:
            selector = f"{discovery.host_uuid_label}={host_uuid}"
            if discovery.host_serial_label is not None:
                selector += f",{discovery.host_serial_label}={self._host_serial()}"
            wanted = f"label {selector}" if "," not in selector else f"labels {selector}"
        where = f"namespace {discovery.namespace}" if discovery.namespace else "any namespace"
        version, items = self._first_version(lambda v: self.client.list(
            resource_path(GROUP, v, "machines", namespace=discovery.namespace),
            label_selector=selector)[0], f"Machines in {where}")
        if discovery.provider_id_pattern is not None:
            # another Machine's malformed spec is not this node's business: it cannot match
            items = [m for m in items if isinstance(m, dict)
                     and isinstance(spec := m.get("spec"), dict)
                     and isinstance(found_id := spec.get("providerID"), str)
                     and pattern.search(found_id)]
        if len(items) != 1:
            shapes = [machine_shape(m) for m in items]
            names = ", ".join(f"{m.namespace}/{m.name}" for m in shapes)
            found = f"{len(items)} match ({names})" if items else "none matches"
            raise PermanentError(
                f"looking for the Machine with {wanted} in {where}: {found}",
                reason=Reason.MachineNotFound,
                hint="label exactly one Machine with this host's UUID, or name it in "
                     "spec.identity.machine")
        return version, items[0]

    def _first_version(self, call: Callable[[str], T], what: str) -> tuple[str, T]:
        """Try v1beta2, then v1beta1; NotFound on both is MachineNotFound."""
        first: NotFound | None = None
        for version in VERSIONS:
            try:
                return version, call(version)
            except NotFound as err:
                first = first or err
        assert first is not None
        raise PermanentError(f"{what} not found: {first.message}",
                             reason=Reason.MachineNotFound) from first

    def _host_serial(self) -> str:
        """The DMI serial, which must be usable as a label value."""
        serial = dmi.product_serial(self.host)
        problem = checks.label_value(serial)
        if problem:
            raise PermanentError(
                f"DMI: {dmi.PRODUCT_SERIAL}: {problem}", reason=Reason.MachineNotFound,
                hint="unset spec.identity.discovery.hostSerialLabel, or name the Machine "
                     "in spec.identity.machine")
        return serial

    # -- what the Machine points at ----------------------------------------------------

    def _wait_for_secret_name(self, version: str, namespace: str, name: str,
                              deadline: float) -> Object:
        self.progress(f"waiting for Machine {namespace}/{name} to get "
                      "spec.bootstrap.dataSecretName from its bootstrap provider")
        watcher = Watcher(self.client, resource_path(GROUP, version, "machines",
                                                     namespace=namespace),
                          field_selector=f"metadata.name={name}", monotonic=self.monotonic)
        try:
            return watcher.until(
                lambda m: bool(machine_shape(m).secret_name),
                deadline, f"Machine {namespace}/{name} spec.bootstrap.dataSecretName")
        except WaitTimedOut as err:
            raise _missing(f"Machine {namespace}/{name} spec.bootstrap.dataSecretName (the "
                           "name of its bootstrap data Secret)", self.wait) from err

    def _cluster(self, version: str, namespace: str,
                 cluster: str) -> tuple[str | None, bool | None]:
        """The Cluster's control-plane endpoint and whether its control plane is
        initialized (one request)."""
        if not cluster:
            return None, None
        doc = self.client.get(resource_path(GROUP, version, "clusters", namespace=namespace,
                                            name=cluster))
        shape = _Shape(f"Cluster {namespace}/{cluster}", doc)
        for path in ("status.initialization", "status.v1beta2",
                     "status.deprecated.v1beta1"):
            shape.obj(path)
        for path in ("status.conditions", "status.v1beta2.conditions",
                     "status.deprecated.v1beta1.conditions"):
            shape.items(path)
        initialized = control_plane_initialized(shape.obj("status"))
        host = shape.text("spec.controlPlaneEndpoint.host")
        port = shape.integer("spec.controlPlaneEndpoint.port", 0, 65535)
        if not host:
            return None, initialized
        if (problem := checks.host_name(host)) is not None:
            raise shape.refuse("spec.controlPlaneEndpoint.host", f"is wrong: {problem}")
        return checks.join_host_port(host, port or 6443), initialized

    def _bootstrap_data(self, namespace: str, name: str,
                        deadline: float) -> tuple[str | None, str | None]:
        path = resource_path("", "v1", "secrets", namespace=namespace, name=name)
        where = f"Secret {namespace}/{name}"
        try:
            secret = self.client.get(path)
        except NotFound:
            if self.wait <= 0:
                return None, None
            self.progress(f"waiting for the bootstrap data Secret {namespace}/{name}")
            watcher = Watcher(self.client, resource_path("", "v1", "secrets",
                                                         namespace=namespace),
                              field_selector=f"metadata.name={name}",
                              monotonic=self.monotonic)
            try:
                secret = watcher.until(
                    lambda s: "value" in _Shape(where, s).strings("data"), deadline,
                    f"the bootstrap data Secret {namespace}/{name}")
            except WaitTimedOut as err:
                raise _missing(f"the bootstrap data Secret {namespace}/{name} (named by "
                               "the Machine's spec.bootstrap.dataSecretName)",
                               self.wait) from err
        data = _Shape(where, secret).strings("data")
        value = decode_base64(data.get("value"), f"Secret {namespace}/{name} key value")
        REDACT.add(value)
        fmt = decode_base64(data.get("format"), f"Secret {namespace}/{name} key format") \
            if data.get("format") else None
        return value, fmt or None

    def _config_source(self, ref: ConfigRef | ManagementSource | None
                       ) -> ManagementSource | None:
        if not isinstance(ref, ConfigRef):
            return ref
        try:
            obj = self.client.get(ref.object_path)
        except NotFound:
            obj = None
        return ref.source(obj)


def control_plane_initialized(status: dict[str, Any]) -> bool:
    """CAPI's contract for "the control plane accepts requests", in either version:
    v1beta2 `status.initialization.controlPlaneInitialized`; v1beta1
    `status.controlPlaneReady`; or a `ControlPlaneInitialized` condition (both versions
    have one, also under `status.v1beta2` and `status.deprecated.v1beta1`). Once true, CAPI
    never resets it."""
    if (status.get("initialization") or {}).get("controlPlaneInitialized") is True \
            or status.get("controlPlaneReady") is True:
        return True
    lists = [status.get("conditions"), (status.get("v1beta2") or {}).get("conditions"),
             ((status.get("deprecated") or {}).get("v1beta1") or {}).get("conditions")]
    return any(isinstance(c, dict) and c.get("type") == "ControlPlaneInitialized"
               and c.get("status") == "True" for found in lists for c in found or [])
