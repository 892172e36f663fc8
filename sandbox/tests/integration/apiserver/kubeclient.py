"""A thin test client on `requests` for the management API tests, and object builders."""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator
from typing import Any, TypeVar

import requests

Obj = dict[str, Any]
T = TypeVar("T")

CAPI = "/apis/cluster.x-k8s.io/v1beta2"
IPAM = "/apis/ipam.cluster.x-k8s.io/v1beta2"
POOLS = "/apis/ipam.cluster.x-k8s.io/v1alpha2"
MERGE = "application/merge-patch+json"
JSON_PATCH = "application/json-patch+json"
APPLY = "application/apply-patch+yaml"


class Kube:
    def __init__(self, base: str, verify: str | bool, token: str | None = None,
                 cert: tuple[str, str] | None = None) -> None:
        self.base = base.rstrip("/")
        self.verify = verify
        self.token = token
        self.cert = cert
        self.ns = "default"
        self.session = requests.Session()
        # REQUESTS_CA_BUNDLE would silently override session.verify otherwise
        self.session.trust_env = False
        self.session.verify = verify
        if cert:
            self.session.cert = cert
        if token:
            self.session.headers["Authorization"] = f"Bearer {token}"

    def with_token(self, token: str | None) -> Kube:
        other = Kube(self.base, self.verify, token=token)
        other.ns = self.ns
        return other

    def request(self, method: str, path: str, **kw: Any) -> requests.Response:
        kw.setdefault("timeout", 10)
        return self.session.request(method, self.base + path, **kw)

    def get(self, path: str, **kw: Any) -> requests.Response:
        return self.request("GET", path, **kw)

    def post(self, path: str, **kw: Any) -> requests.Response:
        return self.request("POST", path, **kw)

    def put(self, path: str, **kw: Any) -> requests.Response:
        return self.request("PUT", path, **kw)

    def delete(self, path: str, **kw: Any) -> requests.Response:
        return self.request("DELETE", path, **kw)

    def patch(self, path: str, body: Any, content_type: str = MERGE,
              **kw: Any) -> requests.Response:
        data = body if isinstance(body, str | bytes) else json.dumps(body)
        return self.request("PATCH", path, data=data,
                            headers={"Content-Type": content_type}, **kw)

    def apply(self, path: str, body: Obj, manager: str, force: bool = False,
              **kw: Any) -> requests.Response:
        params = {"fieldManager": manager, **({"force": "true"} if force else {})}
        return self.patch(path, body, APPLY, params=params, **kw)

    @staticmethod
    def check(resp: requests.Response, code: int) -> Obj:
        assert resp.status_code == code, f"{resp.status_code} {resp.text}"
        body: Obj = resp.json()
        return body

    def watch(self, path: str, params: dict[str, str], timeout: float = 10) -> Iterator[Obj]:
        """Events of a watch, decoded; the stream must end by itself (timeoutSeconds)."""
        with self.session.get(self.base + path, params={"watch": "1", **params}, stream=True,
                              timeout=timeout) as resp:
            assert resp.status_code == 200, resp.text
            for line in resp.iter_lines():
                if line:
                    yield json.loads(line)


def wait_until(check: Callable[[], T | None], timeout: float = 10.0, every: float = 0.05) -> T:
    """Poll `check` until it returns something truthy; fail after `timeout` seconds."""
    deadline = time.monotonic() + timeout
    while True:
        value = check()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"condition not met within {timeout}s")
        time.sleep(every)


def condition(ctype: str, status: str = "True", reason: str = "Ready",
              message: str = "") -> Obj:
    return {"type": ctype, "status": status, "reason": reason, "message": message,
            "lastTransitionTime": "2024-05-01T10:00:00Z"}


def machine(name: str = "worker-0", **spec: Any) -> Obj:
    return {"apiVersion": "cluster.x-k8s.io/v1beta2", "kind": "Machine",
            "metadata": {"name": name},
            "spec": {"clusterName": "demo", "bootstrap": {"dataSecretName": f"{name}-boot"},
                     "infrastructureRef": {"apiGroup": "infrastructure.cluster.x-k8s.io",
                                           "kind": "DockerMachine", "name": name},
                     **spec}}


def claim(name: str, pool: str = "pool", kind: str = "InClusterIPPool") -> Obj:
    return {"apiVersion": "ipam.cluster.x-k8s.io/v1beta2", "kind": "IPAddressClaim",
            "metadata": {"name": name},
            "spec": {"poolRef": {"apiGroup": "ipam.cluster.x-k8s.io", "kind": kind,
                                 "name": pool}}}


def pool(name: str = "pool", addresses: list[str] | None = None, prefix: int = 24,
         gateway: str | None = None, excluded: list[str] | None = None,
         kind: str = "InClusterIPPool") -> Obj:
    spec: Obj = {"addresses": addresses or ["192.0.2.10-192.0.2.12"], "prefix": prefix}
    if gateway:
        spec["gateway"] = gateway
    if excluded:
        spec["excludedAddresses"] = excluded
    return {"apiVersion": "ipam.cluster.x-k8s.io/v1alpha2", "kind": kind,
            "metadata": {"name": name}, "spec": spec}
