"""The agent's one client of the workload cluster, on a kubeconfig: server-side apply
(the CNI manifest, with admin.conf) and reading this node's Node (after join and for its
readiness, with the kubelet's own kubelet.conf).

Resource paths come from API discovery (the manifest's kinds include DaemonSets,
ClusterRoles, ConfigMaps and CRDs alike). Credentials embedded in the kubeconfig
(kubeadm's admin.conf embeds them) are written once, private, under
/run/machine-agent/workload/<kubeconfig's file name>/, because ssl loads certificates
only from files.
"""

from __future__ import annotations

import base64
import contextlib
from pathlib import Path, PurePosixPath
from typing import TYPE_CHECKING, Any

from agent.errors import PermanentError, Reason, TemporaryError
from agent.host import Host
from agent.hostpath import read_regular
from agent.kube.bearer import token_problem
from agent.kube.kubeconfig import MAX_FILE
from agent.logs import REDACT
from agent.recordtype import record
from agent.tls import Trust, ca_pins, default_bundle, explain

if TYPE_CHECKING:
    from agent.kube.transport import Response

FIELD_MANAGER = "machine-agent"
KUBELET_CONF = "/etc/kubernetes/kubelet.conf"
"""The kubelet's kubeconfig, written by kubeadm join: the joined node's credentials to
its workload cluster (the join phase writes it, the cni phase reads the Node with it)."""
CREDENTIALS_DIR = "/run/machine-agent/workload"
TIMEOUT = 30.0


class WorkloadAPIError(PermanentError):
    """The workload cluster refused a request or cannot be used; the reason is the
    caller's (what fails for the user: the CNI, the join)."""


@record(frozen=True)
class NodeReadiness:
    ready: bool
    detail: str
    """The Ready condition's status, reason and message, or why there is none."""
    reason: str = ""
    message: str = ""
    """The Ready condition's own reason and message (empty when there is none)."""


class KubeconfigCluster:
    """The workload cluster named by the kubeconfig's current context. `reason` is what
    its errors report; `missing_hint` what to do when the kubeconfig does not exist."""

    def __init__(self, host: Host, kubeconfig: str, *, reason: Reason,
                 missing_hint: str) -> None:
        import yaml

        from agent import yamlsafe
        from agent.kube.transport import Session

        self.reason = reason
        self.kubeconfig = kubeconfig
        try:
            text = host.read_text(kubeconfig, limit=MAX_FILE)
        except (OSError, UnicodeDecodeError) as err:
            raise WorkloadAPIError(f"the kubeconfig {kubeconfig} cannot be read ({err})",
                                   reason=reason) from err
        if text is None:
            raise WorkloadAPIError(f"the kubeconfig {kubeconfig} does not exist",
                                   reason=reason, hint=missing_hint)
        try:
            doc = yamlsafe.load(text)
            current = doc["current-context"]
            context = _named(doc["contexts"], current)["context"]
            cluster = _named(doc["clusters"], context["cluster"])["cluster"]
            user = _named(doc["users"], context["user"])["user"] or {}
            self.server = str(cluster["server"]).rstrip("/")
        except (yaml.YAMLError, KeyError, TypeError) as err:
            raise WorkloadAPIError(f"the kubeconfig {kubeconfig} is unusable ({err!r})",
                                   reason=reason) from err
        self._credentials = f"{CREDENTIALS_DIR}/{PurePosixPath(kubeconfig).name}"
        self.session = Session()
        # Without a CA in the kubeconfig: the bundle the environment names, else the
        # operating system's trust store (agent.tls.default_bundle), never certifi's.
        self.own_ca = self._file(host, cluster, "certificate-authority", "ca.crt")
        self.verify: str = self.own_ca or default_bundle(host.root, environment=True)
        cert = self._file(host, user, "client-certificate", "client.crt")
        key = self._file(host, user, "client-key", "client.key")
        self.cert = (cert, key) if cert and key else None
        self.headers: dict[str, str] = {}
        if user.get("token"):
            token = str(user["token"]).strip()
            REDACT.add(token)
            if problem := token_problem(token):  # never shown: a header error would
                raise WorkloadAPIError(f"the token in {kubeconfig} {problem}", reason=reason)
            self.headers["Authorization"] = f"Bearer {token}"
        self._resources: dict[str, dict[str, tuple[str, bool]]] = {}

    def _file(self, host: Host, section: dict[str, Any], key: str, name: str) -> str | None:
        """A real path for `key` or `key-data` of a kubeconfig section."""
        if section.get(key):
            return str(host.path(section[key]))
        data = section.get(f"{key}-data")
        if not data:
            return None
        path = f"{self._credentials}/{name}"
        content = base64.b64decode(data)
        if host.exists(path) and host.read_bytes(path) == content:
            return str(host.path(path))
        host.write_file(path, content, mode=0o600, dir_mode=0o700)
        return str(host.path(path))

    def apply(self, obj: dict[str, Any]) -> None:
        import json

        url = self._object_url(obj)
        resp = self._request("PATCH", url, params={"fieldManager": FIELD_MANAGER},
                             data=json.dumps(obj),
                             headers={"Content-Type": "application/apply-patch+yaml"})
        if resp.status_code not in (200, 201):
            raise self._error(resp, f"server-side apply of {obj['kind']} "
                                    f"{obj['metadata']['name']}")

    def node(self, name: str) -> dict[str, Any] | None:
        """The Node object, or None while it is not registered."""
        resp = self._request("GET", f"{self.server}/api/v1/nodes/{name}")
        if resp.status_code == 404:
            return None
        if resp.status_code != 200:
            raise self._error(resp, f"reading Node {name}")
        node: dict[str, Any] = resp.json()
        return node

    def node_readiness(self, name: str) -> NodeReadiness:
        node = self.node(name)
        if node is None:
            return NodeReadiness(False, "the Node is not registered yet")
        for cond in (node.get("status") or {}).get("conditions") or []:
            if cond.get("type") == "Ready":
                reason, message = str(cond.get("reason", "")), str(cond.get("message", ""))
                detail = f"Ready={cond.get('status')} {reason}: {message}".strip()
                return NodeReadiness(cond.get("status") == "True", detail, reason, message)
        return NodeReadiness(False, "the Node has no Ready condition yet")

    def _object_url(self, obj: dict[str, Any]) -> str:
        api_version, kind = obj["apiVersion"], obj["kind"]
        base = f"{self.server}/api/v1" if api_version == "v1" else \
            f"{self.server}/apis/{api_version}"
        if api_version not in self._resources:
            resp = self._request("GET", base)
            if resp.status_code != 200:
                raise self._error(resp, f"discovering {api_version}")
            self._resources[api_version] = {
                r["kind"]: (r["name"], bool(r.get("namespaced")))
                for r in resp.json().get("resources", []) if "/" not in r["name"]}
        found = self._resources[api_version].get(kind)
        if found is None:
            raise WorkloadAPIError(f"the workload cluster does not serve {kind} in "
                                   f"{api_version}", reason=self.reason,
                                   hint="apply its CRD first in the manifest")
        resource, namespaced = found
        name = obj["metadata"]["name"]
        if namespaced:
            namespace = obj["metadata"].get("namespace") or "default"
            return f"{base}/namespaces/{namespace}/{resource}/{name}"
        return f"{base}/{resource}/{name}"

    def _request(self, method: str, url: str, *, headers: dict[str, str] | None = None,
                 **kwargs: Any) -> Response:
        from agent.kube.transport import tls_failure

        try:
            return self.session.request(method, url, timeout=TIMEOUT, verify=self.verify,
                                        cert=self.cert,
                                        headers={**self.headers, **(headers or {})},
                                        **kwargs)
        except OSError as err:
            if tls_failure(err) is None:
                raise TemporaryError(f"the workload API server {self.server} did not "
                                     f"answer: {err}",
                                     reason=Reason.APIServerUnreachable) from err
            problem, fix = explain(err, self._trust())
            raise TemporaryError(f"TLS verification of the workload API server "
                                 f"{self.server} failed: {problem}",
                                 reason=Reason.APIServerUntrusted, hint=fix) from err

    def _trust(self) -> Trust:
        """How the workload API server is verified, in the kubeconfig's terms."""
        from urllib.parse import urlsplit

        pins = []
        if self.own_ca:
            with contextlib.suppress(OSError):  # unreadable: said as "no CA that parses"
                pins = ca_pins(read_regular(Path(self.own_ca), MAX_FILE))
        held = (f"the CA it holds has the pin {', '.join(pins)}" if pins else
                "it holds no CA that parses" if self.own_ca else
                "it names no CA: the system's trust store is used")
        return Trust(
            trusted=self.verify,
            ca_fix=f"{self.kubeconfig} must hold the workload cluster's CA "
                   f"(certificate-authority-data, as kubeadm writes it); {held}, compare "
                   "it with the cluster's CA (its `<cluster>-ca` Secret, or the join's "
                   "discovery caCertHashes); after the cluster's CA changed, `kubeadm "
                   "reset -f` and join again",
            name=urlsplit(self.server).hostname or "",
            name_setting=f"the server in {self.kubeconfig}")

    def _error(self, resp: Response, what: str) -> Exception:
        try:
            message = resp.json().get("message", resp.text[:300])
        except ValueError:
            message = resp.text[:300]
        text = f"{what} failed: HTTP {resp.status_code}: {message}"
        if resp.status_code == 429 or resp.status_code >= 500:
            return TemporaryError(text, reason=Reason.APIServerUnreachable)
        return WorkloadAPIError(text, reason=self.reason,
                                hint="check the request and the kubeconfig's rights")


def _named(items: list[dict[str, Any]], name: str) -> dict[str, Any]:
    for item in items:
        if item.get("name") == name:
            return item
    raise KeyError(name)
