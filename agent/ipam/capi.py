"""The `capi` IPAM plugin: Cluster API IPAddressClaims in the management cluster.

One IPAddressClaim per interface and family, in the Machine's namespace, owned by the
Machine (ownerReferences: Cluster API's garbage collection deletes it with the Machine),
labelled with the cluster name, naming the pool from the configuration. The pool's
provider (in-cluster, Infoblox, NetBox, ...) answers with an IPAddress and sets the
claim's `status.addressRef` (the contract: cluster-api docs/proposals/20220125-ipam-
integration.md); the plugin waits on a watch (bounded) and reads address, prefix and
gateway from it.

Idempotent by claim key: the claim's name is derived from the Machine's name, the
interface, the family and a hash of the claim key (which holds the Machine's UID), so a
retry or a reboot finds the same claim, and a new Machine of the same name gets its own.
"""

from __future__ import annotations

from typing import Any, Literal

from agent.config import checks
from agent.config.fields import Duration, setting
from agent.errors import AgentError, PermanentError, Reason
from agent.ipam.base import (
    Allocation,
    AllocationFailed,
    ClaimRequest,
    IPAMUnauthorized,
    IPAMUnavailable,
    PluginEnv,
    PoolExhausted,
    PoolNotFound,
    validate_allocation,
)
from agent.kube.claims import claim_name
from agent.kube.client import Client, Object, resource_path
from agent.kube.errors import (
    AlreadyExists,
    Forbidden,
    NotFound,
    Unauthorized,
)
from agent.kube.facts import MachineFacts
from agent.kube.watch import WaitTimedOut, Watcher
from agent.recordtype import record

GROUP = "ipam.cluster.x-k8s.io"
CLUSTER_LABEL = "cluster.x-k8s.io/cluster-name"
KEY_ANNOTATION = "machine-agent.io/claim-key"
POLL = 0.2
"""Seconds between checks that a released claim is gone."""
# The reasons Cluster API's IPAM contract gives a claim's Ready condition (and the
# stand-in's pool controller sets): api/ipam/v1beta2 IPAddressClaim conditions.
# AllocationFailed: the provider could not allocate, its message says why
# (api/ipam/v1beta2 IPAddressClaimReadyAllocationFailedReason): reported at once, with it.
FAILED_REASONS = {"PoolNotReady": PoolNotFound, "PoolExhausted": PoolExhausted,
                  "AllocationFailed": AllocationFailed}


@record(frozen=True)
class CAPIPool:
    name: str = setting("Name of the pool object.", check=checks.k8s_name)
    kind: str = setting("Kind of the pool: InClusterIPPool (in the Machine's namespace), "
                        "GlobalInClusterIPPool, or another provider's kind.",
                        default="InClusterIPPool", check=checks.k8s_kind)
    api_group: str = setting("API group of the pool.", default=GROUP, check=checks.k8s_name)


@record(frozen=True)
class CAPIOptions:
    pools: dict[str, CAPIPool] = setting(
        "Pools by the name spec.network uses. A name without an entry is an "
        "InClusterIPPool of that name.", factory=dict)
    api_version: Literal["v1beta2", "v1beta1"] = setting(
        "Version of ipam.cluster.x-k8s.io to use (v1beta1 for Cluster API before 1.11).",
        default="v1beta2")
    timeout: Duration = setting(
        "How long to wait for the provider to answer a claim, or to let a released one go.",
        default=Duration(120), check=checks.positive)


class CAPIPlugin:
    name = "capi"
    OPTIONS = CAPIOptions

    def __init__(self, options: CAPIOptions, env: PluginEnv) -> None:
        if not isinstance(env.management, Client) or env.machine is None:
            raise PermanentError(
                "the capi IPAM plugin needs the management cluster and the Machine",
                reason=Reason.PoolNotFound,
                hint="configure spec.management and spec.identity, or use another plugin")
        self.options = options
        self.client: Client = env.management
        self.machine: MachineFacts = env.machine
        self.host = env.host
        self.clock = env.host.clock
        self.claims = resource_path(GROUP, options.api_version, "ipaddressclaims",
                                    namespace=self.machine.namespace)

    # -- the interface ----------------------------------------------------------------

    def claim(self, request: ClaimRequest) -> Allocation:
        ref = self._pool_ref(request.pool)
        name = claim_name(self.machine.name, request.interface, request.family,
                          request.claim_key)
        with _mapped(f"claim {self.machine.namespace}/{name}"):
            claim = self._ensure_claim(name, ref, request)
            claim = self._wait_for_address(claim, ref)
            return self._allocation(claim, ref, request)

    def lookup(self, request: ClaimRequest) -> Allocation | None:
        """The address this claim key holds, read only (what `machine-agent doctor` asks):
        None when its claim does not exist or is not answered yet; the pool's refusal
        raised as `claim` raises it. Never creates, changes or deletes a claim."""
        ref = self._pool_ref(request.pool)
        name = claim_name(self.machine.name, request.interface, request.family,
                          request.claim_key)
        where = f"IPAddressClaim {self.machine.namespace}/{name}"
        with _mapped(f"look up {self.machine.namespace}/{name}"):
            try:
                claim = self.client.get(f"{self.claims}/{name}")
            except NotFound:
                return None
            failure = _failure(claim)
            if not _address_name(claim):
                if failure is None:
                    return None
                reason, message = failure
                raise FAILED_REASONS[reason](
                    f"capi: {ref['kind']} {ref['name']!r} refused {where} ({reason}): "
                    f"{message}")
            return self._allocation(claim, ref, request)

    def _allocation(self, claim: Object, ref: dict[str, str],
                    request: ClaimRequest) -> Allocation:
        """The address a fulfilled claim points at."""
        address = self.client.get(resource_path(
            GROUP, self.options.api_version, "ipaddresses", namespace=self.machine.namespace,
            name=_address_name(claim)))
        spec = address.get("spec") or {}
        # Types are the CRD's, but checked (validate_allocation): a wrong one is
        # InvalidAllocation naming the field, not a traceback.
        alloc = Allocation(address=spec.get("address", ""),
                           prefix=spec.get("prefix", -1), gateway=spec.get("gateway"),
                           family=request.family, handle=claim["metadata"]["name"],
                           backend=f"capi {ref['kind']}/{ref['name']}")
        return validate_allocation(alloc, request)

    def release(self, allocation: Allocation) -> None:
        with _mapped(f"release {self.machine.namespace}/{allocation.handle}"):
            self._delete_and_wait(allocation.handle)

    # -- the claim --------------------------------------------------------------------

    @staticmethod
    def check_pool(options: CAPIOptions, pool: str) -> str | None:
        """A pool is configured under `pools`, or is itself a pool object's name."""
        if pool in options.pools or checks.k8s_name(pool) is None:
            return None
        return (f"{pool!r} is not a pool of spec.ipam.plugins.capi.pools nor a valid "
                "pool name (lower case, digits, '-', '.')")

    def _pool_ref(self, pool: str) -> dict[str, str]:
        if (problem := self.check_pool(self.options, pool)) is not None:
            raise PoolNotFound(f"capi: {problem}",
                               hint="add it under spec.ipam.plugins.capi.pools")
        configured = self.options.pools.get(pool) or CAPIPool(name=pool)
        return {"apiGroup": configured.api_group, "kind": configured.kind,
                "name": configured.name}

    def _body(self, name: str, ref: dict[str, str], request: ClaimRequest) -> Object:
        m = self.machine
        return {
            "apiVersion": f"{GROUP}/{self.options.api_version}", "kind": "IPAddressClaim",
            "metadata": {
                "name": name, "namespace": m.namespace,
                "labels": {CLUSTER_LABEL: m.cluster_name},
                "annotations": {KEY_ANNOTATION: request.claim_key},
                # No controller/blockOwnerDeletion: those need rights on the Machine the
                # node does not have; plain ownership is enough for garbage collection.
                "ownerReferences": [{"apiVersion": f"cluster.x-k8s.io/{m.api_version}",
                                     "kind": "Machine", "name": m.name, "uid": m.uid}]},
            "spec": {"clusterName": m.cluster_name, "poolRef": ref},
        }

    def _ensure_claim(self, name: str, ref: dict[str, str], request: ClaimRequest) -> Object:
        """The claim of this key: created, or found from an earlier attempt."""
        for _ in range(2):
            try:
                created = self.client.create(self.claims, self._body(name, ref, request))
            except AlreadyExists:
                pass
            else:
                self.host.record_effect(f"create IPAddressClaim {self.machine.namespace}/{name}")
                return created
            existing = self.client.get(f"{self.claims}/{name}")
            if existing["metadata"].get("deletionTimestamp"):
                # released a moment ago (or by an earlier failed attempt): let it go first
                self._delete_and_wait(name)
                continue
            key = (existing["metadata"].get("annotations") or {}).get(KEY_ANNOTATION)
            if key != request.claim_key:
                raise PermanentError(
                    f"capi: IPAddressClaim {self.machine.namespace}/{name} exists for claim "
                    f"key {key!r}, not {request.claim_key!r}", reason=Reason.InvalidAllocation,
                    hint="delete that claim if it is stale")
            if existing["spec"].get("poolRef") != ref:
                raise PermanentError(
                    f"capi: IPAddressClaim {self.machine.namespace}/{name} names pool "
                    f"{existing['spec'].get('poolRef')}, the configuration {ref}",
                    reason=Reason.InvalidAllocation,
                    hint="release it first (machine-agent reset) to claim from the new pool")
            return existing
        raise IPAMUnavailable(f"capi: IPAddressClaim {self.machine.namespace}/{name} is "
                              "being deleted and came back; try again")

    def _wait_for_address(self, claim: Object, ref: dict[str, str]) -> Object:
        name = claim["metadata"]["name"]

        def answered(obj: Object) -> bool:
            return bool(_address_name(obj)) or _failure(obj) is not None

        where = f"IPAddressClaim {self.machine.namespace}/{name}"
        if not answered(claim):
            deadline = self.clock.monotonic() + float(self.options.timeout)
            watcher = Watcher(self.client, self.claims,
                              field_selector=f"metadata.name={name}",
                              monotonic=self.clock.monotonic)
            try:
                claim = watcher.until(answered, deadline,
                                      f"an IPAddress for {where} from {ref['kind']} "
                                      f"{ref['name']!r}")
            except WaitTimedOut as err:
                raise IPAMUnavailable(
                    f"capi: no IPAddress for {where} within {self.options.timeout:g}s: "
                    f"the provider of {ref['kind']} {ref['name']!r} did not answer",
                    hint=f"check that the pool exists and has free addresses and that its "
                         f"provider runs (kubectl describe ipaddressclaim -n "
                         f"{self.machine.namespace} {name})") from err
        failure = _failure(claim)
        if failure is not None and not _address_name(claim):
            reason, message = failure
            # nothing half-created: a claim the provider refused must not grab an
            # address later, when the node has stopped waiting for it
            self._delete_and_wait(name)
            raise FAILED_REASONS[reason](
                f"capi: {ref['kind']} {ref['name']!r} refused {where} ({reason}): {message}")
        return claim

    def _delete_and_wait(self, name: str) -> None:
        """Delete the claim and wait (bounded) until it is gone: the provider's finalizer
        frees its address first."""
        path = f"{self.claims}/{name}"
        try:
            self.client.delete(path)
        except NotFound:
            return
        self.host.record_effect(f"delete IPAddressClaim {self.machine.namespace}/{name}")
        deadline = self.clock.monotonic() + float(self.options.timeout)
        while self.clock.monotonic() < deadline:
            try:
                self.client.get(path)
            except NotFound:
                return
            self.clock.sleep(POLL)
        raise IPAMUnavailable(f"capi: IPAddressClaim {self.machine.namespace}/{name} was "
                              f"deleted but still exists after {self.options.timeout:g}s",
                              hint="its provider's finalizer did not release the address; "
                                   "check that the provider runs")


def _address_name(claim: Object) -> str:
    return str(((claim.get("status") or {}).get("addressRef") or {}).get("name") or "")


def _failure(claim: Object) -> tuple[str, str] | None:
    """(reason, message) of a Ready=False condition that means the claim will not be
    fulfilled as things stand; providers that set no conditions never give one. Read
    where either API version keeps them: status.conditions, status.v1beta2.conditions
    (a claim read as v1beta1), status.deprecated.v1beta1.conditions (as v1beta2)."""
    status = claim.get("status") or {}
    lists = [status.get("conditions"), (status.get("v1beta2") or {}).get("conditions"),
             ((status.get("deprecated") or {}).get("v1beta1") or {}).get("conditions")]
    for conditions in lists:
        for cond in conditions if isinstance(conditions, list) else []:
            if (isinstance(cond, dict) and cond.get("type") == "Ready"
                    and cond.get("status") == "False"
                    and cond.get("reason") in FAILED_REASONS):
                return str(cond["reason"]), str(cond.get("message") or "")
    return None


class _mapped:
    """Management-API errors as IPAM errors: no answer or 5xx is IPAMUnavailable,
    401/403 IPAMUnauthorized, a missing API PoolNotFound."""

    def __init__(self, what: str) -> None:
        self.what = what

    def __enter__(self) -> None:
        return None

    def __exit__(self, kind: type[BaseException] | None, err: BaseException | None,
                 tb: Any) -> None:
        if err is None or not isinstance(err, AgentError) or err.reason in (
                Reason.PoolExhausted, Reason.PoolNotFound, Reason.IPAMUnavailable,
                Reason.InvalidAllocation, Reason.IPAMUnauthorized):
            return
        message = f"capi: {self.what}: {err.message}"
        if isinstance(err, Unauthorized | Forbidden):
            raise IPAMUnauthorized(message, hint=err.hint) from err
        if isinstance(err, NotFound):
            raise PoolNotFound(message, hint="are Cluster API's IPAM CRDs installed "
                                             "(ipam.cluster.x-k8s.io)?") from err
        if err.temporary:
            raise IPAMUnavailable(message) from err
