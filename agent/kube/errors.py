"""Typed errors of the management API, each mapped to a condition reason.

An answer that is a Kubernetes `Status` becomes one of these, carrying the server's own
message, its `reason` and (for 422 Invalid) the causes with their field paths. Whether an
error is retried follows the API's contract: no answer, 429 and 5xx may succeed later;
other 4xx will not without a change by a person.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from agent.errors import AgentError, Reason
from agent.recordtype import record


@record(frozen=True)
class Cause:
    """One entry of a Status's `details.causes`."""

    reason: str
    message: str
    field: str = ""

    def __str__(self) -> str:
        return f"{self.field}: {self.message}" if self.field else self.message


class Unreachable(AgentError):
    """No answer: connection refused or reset, TLS failure, time-out."""

    reason = Reason.ManagementUnreachable
    temporary = True


class APIError(AgentError):
    """The API answered with a failure. `code` is the HTTP status, `status_reason` the
    Status's `reason` (e.g. `Conflict`), `causes` its details."""

    reason = Reason.InternalError
    temporary = False

    def __init__(self, message: str, *, code: int, status_reason: str = "",
                 causes: tuple[Cause, ...] = (), retry_after: float | None = None,
                 reason: Reason | None = None, hint: str | None = None) -> None:
        super().__init__(message, reason=reason, hint=hint)
        self.code = code
        self.status_reason = status_reason
        self.causes = causes
        self.retry_after = retry_after


class ServerError(APIError):
    """5xx: the server (or something in front of it) failed; worth retrying."""

    reason = Reason.ManagementUnreachable
    temporary = True


class TooManyRequests(APIError):
    """429: the server asks the client to slow down (and says for how long)."""

    reason = Reason.ManagementUnreachable
    temporary = True


class Unauthorized(APIError):
    """401: the credentials are not accepted; retrying will not help."""

    reason = Reason.ManagementUnauthorized


class Forbidden(APIError):
    """403: the identity lacks a permission (RBAC)."""

    reason = Reason.ManagementForbidden


class NotFound(APIError):
    """404: the object (or the API version) does not exist."""


class Conflict(APIError):
    """409 Conflict: stale resourceVersion, or a field owned by another manager (cause
    FieldManagerConflict; the reporter's forced apply never meets it)."""


class AlreadyExists(APIError):
    """409 AlreadyExists: a create for a name that is taken."""


class Invalid(APIError):
    """422: the object breaks the schema; `causes` name each field."""


class Gone(APIError):
    """410: the resourceVersion asked for is too old (compacted); relist."""


_BY_CODE: dict[int, type[APIError]] = {
    401: Unauthorized, 403: Forbidden, 404: NotFound, 410: Gone, 422: Invalid,
    429: TooManyRequests,
}

_HINTS: dict[type[APIError], str] = {
    Unauthorized: "the credentials were refused: expired, revoked or never valid; give the "
                  "node a valid token or kubeconfig (spec.management, docs/identity.md); "
                  "a 401 is not retried",
    Forbidden: "apply templates/rbac/node-rbac.yaml for this node's identity",
    # An answer came back: the route and firewall are fine (the Reason's default fix
    # would send the operator there).
    ServerError: "the API server (or a proxy or load balancer in front of it) answered "
                 "but failed: look at its logs, etcd and any webhook or aggregated API; "
                 "the agent retries",
}


def error_from_status(code: int, status: Mapping[str, Any] | None, what: str,
                      retry_after: float | None = None) -> APIError:
    """The typed error for an HTTP failure `code` with its (possibly absent) Status body.

    `what` says which request failed (`GET machines default/worker-0`), so the message
    reads `GET ...: 403 Forbidden: <the server's message>`.
    """
    status = status or {}
    status_reason = str(status.get("reason") or "")
    server_message = str(status.get("message") or "").strip()
    details = status.get("details") or {}
    causes = tuple(
        Cause(str(c.get("reason", "")), str(c.get("message", "")), str(c.get("field", "")))
        for c in details.get("causes") or [] if isinstance(c, Mapping))
    if code == 409:
        cls: type[APIError] = AlreadyExists if status_reason == "AlreadyExists" else Conflict
    elif code >= 500:
        cls = ServerError
    else:
        cls = _BY_CODE.get(code, APIError)
    label = f"{code} {status_reason}".strip()
    message = f"{what}: {label}: {server_message}" if server_message else f"{what}: {label}"
    if causes and cls is Invalid:
        message += "".join(f"\n  {c}" for c in causes)
    return cls(message, code=code, status_reason=status_reason, causes=causes,
               retry_after=retry_after, hint=_HINTS.get(cls))
