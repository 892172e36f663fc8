"""`ApiServer`: the stand-in assembled — store, verbs, HTTPS server thread, garbage
collector and (optionally) the in-cluster IPAM pool controller."""

from __future__ import annotations

import base64
import ssl
import threading
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import yaml

from machine_agent_sandbox.files import write_atomic

from .auth import ADMIN_USER, MASTERS, Tokens, generate_tls, service_account_user
from .calls import Call
from .clientcerts import ClientCA
from .compaction import DEFAULT_INTERVAL as DEFAULT_COMPACTION
from .compaction import Compactor
from .context import Context
from .faults import Counters, Faults
from .gc import GarbageCollector
from .ipampool import PoolController
from .leases import LeaseRenewer
from .objects import Objects
from .rbac import Authorizer
from .resources import Registry
from .server import Server
from .store import Store

Obj = dict[str, Any]

_SYSTEM_NAMESPACES = ("default", "kube-system", "kube-public", "kube-node-lease")


class ApiServer:
    """A local Kubernetes API server stand-in for tests and `machine-agent demo`.

    `state_dir` receives ca.crt, apiserver.crt/.key and admin.kubeconfig. Listens on
    `host:port` (0: any free port). `ipam=True` runs the in-cluster IPAM pool controller;
    `ipam_conditions` makes it report a `Ready` condition on claims it cannot fulfil
    (the released provider does not; see ipampool.py). `controllers=False` runs no
    garbage collector either: a bare kube-apiserver with etcd, as the corpus recorded
    (Foreground deletions and terminating namespaces then stay as they are).
    `lease_interval` (seconds; None: never) renews the control plane's leader-election
    Leases as a real cluster does, so the resourceVersion moves on a quiet store.
    `compaction_interval` (seconds; None: never) compacts the watch history as
    kube-apiserver has etcd compacted (compaction.py); `compact()` does it at once.
    """

    def __init__(self, state_dir: str | Path, host: str = "127.0.0.1", port: int = 0,
                 extra_ips: Iterable[str] = (), history_size: int = 1000,
                 bookmark_interval: float = 1.0, ipam: bool = True,
                 ipam_conditions: bool = True, controllers: bool = True,
                 lease_interval: float | None = 2.0,
                 compaction_interval: float | None = DEFAULT_COMPACTION) -> None:
        self.state_dir = Path(state_dir)
        self._host, self._port = host, port
        self._extra_ips = [*extra_ips] + ([host] if host not in ("0.0.0.0", "::") else [])
        self.registry = Registry()
        self.registry.load_bundled_crds()
        self.store = Store(history_size)
        self.objects = Objects(self.store, self.registry)
        self.tokens = Tokens()
        self.faults = Faults()
        self._counters = Counters()
        self.admin_token = self.tokens.issue(ADMIN_USER, [MASTERS])
        self._ctx = Context(self.objects, self.tokens, Authorizer(self.store), self.faults,
                            self._counters, bookmark_interval)
        self._gc = GarbageCollector(self.objects) if controllers else None
        self._pools = (PoolController(self.objects, ipam_conditions)
                       if ipam and controllers else None)
        self._leases = LeaseRenewer(self.objects, lease_interval) if lease_interval else None
        self._compactor = (Compactor(self.store, compaction_interval)
                           if compaction_interval else None)
        self._httpd: Server | None = None
        self._thread: threading.Thread | None = None
        self.ca_cert_pem = ""
        self.ca_path = self.state_dir / "ca.crt"
        for ns in _SYSTEM_NAMESPACES:
            self.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}})

    # --- lifecycle -------------------------------------------------------------------

    def start(self) -> ApiServer:
        tls = generate_tls(self.state_dir, self._extra_ips)
        self.ca_cert_pem, self.ca_path = tls.ca_pem, tls.ca_path
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.load_cert_chain(tls.cert_path, tls.key_path)
        # Client certificates signed by the cluster CA are users (--client-ca-file), as
        # a kubelet's after its TLS bootstrap; a client may present none.
        context.verify_mode = ssl.CERT_OPTIONAL
        context.load_verify_locations(cadata=tls.ca_pem)
        self._ctx.client_ca = ClientCA(tls.ca)
        httpd = Server((self._host, self._port), self._ctx)
        httpd.socket = context.wrap_socket(httpd.socket, server_side=True,
                                           do_handshake_on_connect=False)
        self._httpd = httpd
        self._ctx.address = f"{self._host}:{self.port}"
        self._thread = threading.Thread(target=httpd.serve_forever, kwargs={"poll_interval": 0.1},
                                        name="sandbox-apiserver", daemon=True)
        self._thread.start()
        if self._gc is not None:
            self._gc.start()
        if self._leases is not None:
            self._leases.start()
        if self._compactor is not None:
            self._compactor.start()
        if self._pools is not None:
            self._pools.start()
        # Last, and whole: a waiting process (sandbox cluster.py) reads it as soon as it exists.
        write_atomic(self.state_dir / "admin.kubeconfig", self.kubeconfig(), mode=0o600)
        return self

    def stop(self) -> None:
        self._ctx.stop.set()
        if self._pools is not None:
            self._pools.stop()
        if self._gc is not None:
            self._gc.stop()
        if self._leases is not None:
            self._leases.stop()
        if self._compactor is not None:
            self._compactor.stop()
        if self._httpd is not None:
            self._httpd.shutdown()
            self._httpd.server_close()
            self._httpd.close_connections()
        if self._thread is not None:
            self._thread.join(timeout=5)

    def __enter__(self) -> ApiServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def port(self) -> int:
        assert self._httpd is not None, "start() the server first"
        return int(self._httpd.server_address[1])

    @property
    def url(self) -> str:
        host = f"[{self._host}]" if ":" in self._host else self._host
        return f"https://{host}:{self.port}"

    # --- identities --------------------------------------------------------------------

    def make_token(self, user: str, groups: Iterable[str] = (), uid: str = "") -> str:
        """A bearer token for `user` (system:authenticated is always added)."""
        return self.tokens.issue(user, list(groups), uid)

    def make_service_account_token(self, namespace: str, name: str) -> str:
        return self.tokens.issue_for(service_account_user(namespace, name))

    def kubeconfig(self, user: str = ADMIN_USER, groups: Iterable[str] = (),
                   namespace: str = "default", token: str | None = None) -> str:
        """Kubeconfig text for `user`: the admin's token for the admin, else a new one."""
        if token is None:
            token = self.admin_token if user == ADMIN_USER else self.make_token(user, groups)
        ca = base64.b64encode(self.ca_cert_pem.encode()).decode()
        doc = {"apiVersion": "v1", "kind": "Config", "current-context": "sandbox",
               "clusters": [{"name": "sandbox", "cluster": {
                   "server": self.url, "certificate-authority-data": ca}}],
               "users": [{"name": user, "user": {"token": token}}],
               "contexts": [{"name": "sandbox", "context": {
                   "cluster": "sandbox", "user": user, "namespace": namespace}}]}
        return yaml.safe_dump(doc, sort_keys=False)

    # --- test hooks ----------------------------------------------------------------------

    def counters(self) -> dict[tuple[str, str], int]:
        """Requests seen so far, by (verb, resource): ("patch", "machines/status")."""
        return self._counters.snapshot()

    def reset_counters(self) -> None:
        self._counters.reset()

    def drop_connections(self) -> None:
        """Cut every open connection now (watches included), as a network outage or an
        API server restart does."""
        if self._httpd is not None:
            self._httpd.close_connections()

    def compact(self) -> int:
        """Drop the watch history now; returns the oldest resourceVersion still served."""
        return self.store.compact()

    def create(self, obj: Obj) -> Obj:
        """Create any object in-process as the admin (seeding a scenario)."""
        group, _, version = obj["apiVersion"].rpartition("/")
        res = self.registry.by_kind(group, obj["kind"])
        if res is None:
            raise KeyError(f"no resource serves {obj['apiVersion']} {obj['kind']}")
        namespace = (obj.get("metadata") or {}).get("namespace", "") if res.namespaced else ""
        if res.namespaced and not namespace:
            namespace = "default"
        call = Call("create", res, version, namespace, user_agent="sandbox-seed")
        return self.objects.create(call, obj).body
