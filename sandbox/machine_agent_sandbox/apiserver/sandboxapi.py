"""`/sandbox/v1/...`: the test hooks over HTTP, for a stand-in running as a process.
Admin (system:masters) only. Not part of any real Kubernetes API.

    GET    /sandbox/v1/counters   -> {"counters": [{"verb", "resource", "count"}]}
    DELETE /sandbox/v1/counters   reset them
    POST   /sandbox/v1/faults     {"kind", "path", "method", "count", "seconds",
                                   "retry_after", "after_events"}
    DELETE /sandbox/v1/faults     clear every fault
    POST   /sandbox/v1/compact    forget the watch history -> {"resourceVersion": floor}
    POST   /sandbox/v1/tokens     {"user", "groups", "uid"} -> {"token"}
    POST   /sandbox/v1/certificates {"user", "groups"} -> {"certificate", "key"}: a client
                                  certificate signed by the cluster CA (the CSR signer's)
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from . import status as st
from .auth import User

if TYPE_CHECKING:
    from .context import Context

Obj = dict[str, Any]

_FAULT_FIELDS = ("kind", "path", "method", "count", "seconds", "retry_after", "after_events")


def handle(ctx: Context, user: User, method: str, parts: list[str], body: Any) -> tuple[int, Obj]:
    if not user.is_admin:
        raise st.ApiError(403, "Forbidden", "the sandbox hooks are for system:masters only")
    what = "/".join(parts[2:]) if parts[1:2] == ["v1"] else ""
    body = body if isinstance(body, dict) else {}
    if what == "counters" and method == "GET":
        return 200, {"counters": [{"verb": v, "resource": r, "count": n}
                                  for (v, r), n in sorted(ctx.counters.snapshot().items())]}
    if what == "counters" and method == "DELETE":
        ctx.counters.reset()
        return 200, {}
    if what == "faults" and method == "POST":
        try:
            fault = ctx.faults.add(**{k: body[k] for k in _FAULT_FIELDS if k in body})
        except (TypeError, ValueError) as exc:
            raise st.bad_request(str(exc)) from None
        return 201, {"kind": fault.kind, "path": fault.path, "method": fault.method,
                     "count": fault.count}
    if what == "faults" and method == "DELETE":
        ctx.faults.clear()
        return 200, {}
    if what == "compact" and method == "POST":
        return 200, {"resourceVersion": str(ctx.objects.store.compact())}
    if what == "tokens" and method == "POST":
        token = ctx.tokens.issue(str(body.get("user", "")), list(body.get("groups") or []),
                                 uid=str(body.get("uid") or ""))
        return 201, {"token": token}
    if what == "certificates" and method == "POST" and ctx.client_ca is not None:
        cert, key = ctx.client_ca.issue(str(body.get("user", "")),
                                        [str(g) for g in body.get("groups") or []])
        return 201, {"certificate": cert, "key": key}
    raise st.ApiError(404, "NotFound", "the server could not find the requested resource", {})
