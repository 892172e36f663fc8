"""A management-API client that can only read: GETs, and the review objects the API
server evaluates without storing anything (SelfSubjectAccessReview)."""

from __future__ import annotations

from typing import Any

from agent.host import ReadOnlyHostError
from agent.kube.client import Client
from agent.kube.kubeconfig import Credentials
from agent.retry import Backoff

REVIEWS = ("/apis/authorization.k8s.io/v1/selfsubjectaccessreviews",)
ONE_TRY = Backoff(base=0.1, cap=0.1, attempts=1)
"""doctor reports what it sees now; the agent itself is the one that retries."""


def read_only_client(creds: Credentials, timeout: float) -> Client:
    import requests

    class ReadOnlySession(requests.Session):
        def request(self, method: str | bytes, url: str | bytes,
                    *args: Any, **kwargs: Any) -> requests.Response:
            verb = method.decode() if isinstance(method, bytes) else method
            where = url.decode() if isinstance(url, bytes) else url
            if verb.upper() not in ("GET", "HEAD") and not (
                    verb.upper() == "POST" and where.split("?")[0].endswith(REVIEWS)):
                raise ReadOnlyHostError(f"refused by doctor's read-only client: {verb} "
                                        f"{where}")
            return super().request(method, url, *args, **kwargs)

    return Client(creds, timeout=timeout, backoff=ONE_TRY, session=ReadOnlySession())
