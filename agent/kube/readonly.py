"""A management-API client that can only read: GETs, and the review objects the API
server evaluates without storing anything (SelfSubjectAccessReview)."""

from __future__ import annotations

from typing import Any

from agent.host import ReadOnlyHostError
from agent.kube.client import Client
from agent.kube.kubeconfig import Credentials
from agent.kube.transport import Response, Session
from agent.retry import Backoff

REVIEWS = ("/apis/authorization.k8s.io/v1/selfsubjectaccessreviews",)
ONE_TRY = Backoff(base=0.1, cap=0.1, attempts=1)
"""doctor reports what it sees now; the agent itself is the one that retries."""


class ReadOnlySession(Session):
    def request(self, method: str, url: str, **kwargs: Any) -> Response:
        if method.upper() not in ("GET", "HEAD") and not (
                method.upper() == "POST" and url.split("?")[0].endswith(REVIEWS)):
            raise ReadOnlyHostError(f"refused by doctor's read-only client: {method} {url}")
        return super().request(method, url, **kwargs)


def read_only_client(creds: Credentials, timeout: float) -> Client:
    return Client(creds, timeout=timeout, backoff=ONE_TRY, session=ReadOnlySession())
