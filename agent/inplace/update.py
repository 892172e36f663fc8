"""UpdateMachine: the desired in-place changes handed to the Machine's agent, and its
answer read back.

The agent on a node follows its AgentConfig object, the ConfigMap its Machine's
annotation `machine-agent.io/config` names (the node's RBAC grants it that object only),
and applies a change with its trial and rollback (agent.daemon.reconfigure), reporting
`AgentConfigApplied` on the Machine with the digest of the content it applied or refused.
So an update writes the desired settings into that ConfigMap (NTP servers: its
`spec.time.servers`; kubelet flags: `spec.join.nodeRegistration.kubeletExtraArgs`; files:
`spec.join.files`; a worker Machine's Kubernetes version: `spec.join.inPlaceVersion`,
which changes nothing on a node that runs it) and answers, every time Cluster API asks
again: `retryAfterSeconds` until the Machine's condition names that content, then
Success, or Failure with the agent's own message (Cluster API shows only "UpdateMachine
hook failed" on the Machine; the reason and its fix are in the agent's condition).
Writing the same content again changes nothing, so a repeated call is harmless.
"""

from __future__ import annotations

import yaml

from agent import yamlsafe
from agent.config import checks
from agent.errors import AgentError
from agent.inplace.decide import CONTROL_PLANE_LABEL, kept_files, kubelet_args, ntp_servers
from agent.inplace.hooks import GROUP_VERSION, Obj, failure
from agent.kube.client import Client, resource_path
from agent.kube.errors import NotFound
from agent.kube.machine_config import CONFIG_ANNOTATION, CONFIG_KEY, content_digest
from agent.recordtype import record

RETRY_SECONDS = 5
CONDITION = "AgentConfigApplied"
SKELETON = {"apiVersion": "machine-agent.io/v1alpha1", "kind": "AgentConfig", "spec": {}}


def _response(retry: int = 0, message: str = "") -> Obj:
    out: Obj = {"apiVersion": GROUP_VERSION, "kind": "UpdateMachineResponse",
                "status": "Success", "retryAfterSeconds": retry}
    if message:
        out["message"] = message
    return out


@record(frozen=True)
class InPlace:
    """What the agent is asked to make in place: the KubeadmConfig's NTP servers, kubelet
    flags and files, the Machine's release (empty: not asked)."""

    servers: tuple[str, ...] = ()
    kubelet_args: tuple[tuple[str, str], ...] = ()
    files: tuple[tuple[tuple[str, str], ...], ...] = ()
    """Each file's {path, content, permissions, owner}, as items."""
    release: str = ""
    """The Machine's Kubernetes version, when a worker's (a control plane's is not
    changed in place)."""

    @classmethod
    def of(cls, bootstrap_spec: Obj, machine: Obj | None = None) -> InPlace:
        spec, meta = (machine or {}).get("spec") or {}, (machine or {}).get("metadata") or {}
        version = spec.get("version")
        release = version if isinstance(version, str) and not checks.k8s_release(version) \
            and CONTROL_PLANE_LABEL not in (meta.get("labels") or {}) else ""
        return cls(tuple(ntp_servers(bootstrap_spec.get("ntp"))),
                   tuple(sorted((kubelet_args(bootstrap_spec) or {}).items())),
                   tuple(tuple(f.items()) for f in kept_files(bootstrap_spec) or []),
                   release)

    def applied_to(self, text: str | None) -> str:
        """The AgentConfig text with these settings: `spec.time.servers` (each server's
        other settings kept), `spec.join.nodeRegistration.kubeletExtraArgs` and
        `spec.join.files`; everything else as it was."""
        doc = yamlsafe.load(text) if text else None
        doc = doc if isinstance(doc, dict) else dict(SKELETON)
        spec = _section(doc, "spec")
        if self.servers:
            time = _section(spec, "time")
            servers = time.get("servers")
            old = [s for s in servers if isinstance(s, dict)] if isinstance(servers, list) \
                else []
            time["servers"] = [entry for host in self.servers
                               for entry in ([s for s in old if str(s.get("host")) == host]
                                             or [{"host": host}])]
        if self.kubelet_args:
            _section(_section(spec, "join"), "nodeRegistration")["kubeletExtraArgs"] = \
                dict(self.kubelet_args)
        if self.files:
            _section(spec, "join")["files"] = [dict(f) for f in self.files]
        if self.release:
            _section(spec, "join")["inPlaceVersion"] = self.release
        return str(yaml.safe_dump(doc, sort_keys=False))


def _section(parent: Obj, key: str) -> Obj:
    """parent[key] as a mapping (made one when it is missing or not one: the node's
    validation would refuse that content anyway)."""
    if not isinstance(parent.get(key), dict):
        parent[key] = {}
    found: Obj = parent[key]
    return found


def update_machine(request: Obj, client: Client) -> Obj:
    desired = request.get("desired") or {}
    meta = (desired.get("machine") or {}).get("metadata") or {}
    namespace, name = str(meta.get("namespace") or ""), str(meta.get("name") or "")
    wanted = InPlace.of((desired.get("bootstrapConfig") or {}).get("spec") or {},
                        desired.get("machine"))
    if wanted == InPlace():
        return _response(message="nothing for the agent to change in place")
    try:
        return _carry_out(client, namespace, name, wanted)
    except AgentError as err:
        return failure("UpdateMachineResponse", f"Machine {namespace}/{name}: {err}")


def _carry_out(client: Client, namespace: str, name: str, wanted: InPlace) -> Obj:
    machine_path = resource_path("cluster.x-k8s.io", "v1beta2", "machines",
                                 namespace=namespace, name=name)
    machine = client.get(machine_path)
    ref = str(((machine.get("metadata") or {}).get("annotations") or {})
              .get(CONFIG_ANNOTATION) or "")
    kind, _, config_name = ref.partition("/")
    if kind.lower() != "configmap" or not config_name:
        return failure("UpdateMachineResponse", (
            f"Machine {namespace}/{name} names no AgentConfig ConfigMap (annotation "
            f"{CONFIG_ANNOTATION}: {ref or 'unset'}): the agent takes in-place changes "
            "from it; give the Machines one (configmap/NAME in the MachineDeployment's "
            "template annotations) and let the node's RBAC read it"))
    path = resource_path("", "v1", "configmaps", namespace=namespace, name=config_name)
    try:
        current = client.get(path)
    except NotFound:
        current = None
    data = (current or {}).get("data") or {}
    text = wanted.applied_to(data.get(CONFIG_KEY))
    if current is None:
        client.create(resource_path("", "v1", "configmaps", namespace=namespace), {
            "apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": config_name, "namespace": namespace},
            "data": {CONFIG_KEY: text}})
    elif data.get(CONFIG_KEY) != text:
        client.request("PATCH", path, body={"data": {CONFIG_KEY: text}},
                       content_type="application/merge-patch+json")
    digest = content_digest(text)
    for condition in (machine.get("status") or {}).get("conditions") or []:
        if condition.get("type") != CONDITION or digest not in str(condition.get("message")):
            continue
        if condition.get("status") == "True":
            return _response(message=f"the agent applied {digest}")
        if condition.get("status") == "False":
            return failure("UpdateMachineResponse",
                           f"the agent on Machine {namespace}/{name} refused the change and "
                           f"kept the previous configuration, {condition.get('reason')}: "
                           f"{condition.get('message')}")
    return _response(RETRY_SECONDS, f"waiting for the agent on Machine {namespace}/{name} to "
                                    f"apply {digest} (configmap {namespace}/{config_name})")
