"""Is the bootstrap token the node joins with still good?

Best evidence first: the token's own Secret (`kube-system/bootstrap-token-<id>`, field
`expiration`) when the node's identity may read it (a self-managed management cluster);
else the join discovery kubeadm itself does: the workload cluster's public
`kube-public/cluster-info` ConfigMap carries a `jws-kubeconfig-<id>` signature for every
token that is known and not expired (the token cleaner deletes expired ones), made with
the token's secret (k8s.io/cluster-bootstrap/token/jws, HS256, detached payload).
Otherwise doctor says it could not check.
"""

from __future__ import annotations

import base64
import binascii
import datetime as dt
import hashlib
import hmac
import re
from collections.abc import Iterator

from agent.errors import AgentError, Reason
from agent.kube.kubeconfig import Credentials
from agent.kube.readonly import read_only_client
from agent.phases.checks import Check, Doctor, from_last_run, not_checked
from agent.phases.join.source import resolve

NAME = "bootstrap-token"
DISCOVERY_TIMEOUT = 3.0
"""Seconds to wait for the workload cluster's cluster-info (it may not be up yet)."""
TOKEN = re.compile(r"^([a-z0-9]{6})\.([a-z0-9]{16})$")
"""k8s.io/cluster-bootstrap/token/api BootstrapTokenPattern."""
ROTATE = ("let the bootstrap provider issue a fresh token (CABPK refreshes it while the "
          "Machine is not yet a Node); the agent re-reads the bootstrap Secret")


def token_checks(doctor: Doctor, phase: str) -> Iterator[Check]:
    if doctor.config is None:
        return
    try:
        source = resolve(doctor.config, doctor.machine.facts if doctor.machine else None,
                         doctor.host)
    except AgentError as err:
        yield not_checked(phase, NAME, f"no join source ({err.message})")
        return
    token = source.facts.token
    if token is None:
        yield Check(phase, NAME, "pass", "the join uses file discovery, no bootstrap token")
        return
    m = TOKEN.match(token)
    if m is None:
        yield Check(phase, NAME, "fail", "the bootstrap token is not of the form "
                    "[a-z0-9]{6}.[a-z0-9]{16}", "fix the token in the bootstrap data")
        return
    token_id, secret = m.groups()
    now = doctor.host.clock.now()
    if doctor.client is not None:
        try:
            obj = doctor.client.get(f"/api/v1/namespaces/kube-system/secrets/"
                                    f"bootstrap-token-{token_id}")
        except AgentError:
            obj = None  # not readable by this identity: try discovery
        if obj is not None:
            yield _from_secret(phase, token_id, obj, now)
            return
    endpoint = source.facts.api_server_endpoint
    check = (Check(phase, NAME, "warn", f"token {token_id}: expiry not checked (its Secret "
                   "is not readable and the JoinConfiguration names no apiServerEndpoint)",
                   "") if endpoint is None else
             _from_discovery(phase, token_id, secret, endpoint))
    last = doctor.last_failure("join", Reason.TokenExpired, Reason.TokenInvalid)
    if check.status == "warn" and last is not None:
        # kubeadm's own discovery refused the token on the last join attempt
        check = from_last_run(phase, NAME, last,
                              check.seen.partition("not checked")[2].lstrip(": "), ROTATE)
    yield check


def _from_secret(phase: str, token_id: str, obj: dict[str, object],
                 now: dt.datetime) -> Check:
    data = obj.get("data") or {}
    raw = data.get("expiration") if isinstance(data, dict) else None
    if not raw:
        return Check(phase, NAME, "pass", f"token {token_id}: its Secret sets no expiration")
    try:
        text = base64.b64decode(str(raw)).decode()
        expires = dt.datetime.fromisoformat(text.replace("Z", "+00:00"))
    except (ValueError, binascii.Error) as err:
        return Check(phase, NAME, "warn", f"token {token_id}: expiration unreadable ({err})",
                     "")
    left = (expires - now).total_seconds()
    details = {"tokenID": token_id, "expires": text, "source": "secret"}
    if left <= 0:
        return Check(phase, NAME, "fail", f"token {token_id} expired at {text}", ROTATE,
                     details)
    return Check(phase, NAME, "pass", f"token {token_id} expires at {text} (in "
                 f"{left / 60:.0f} min)", details=details)


def _from_discovery(phase: str, token_id: str, secret: str, endpoint: str) -> Check:
    # Unverified TLS, as kubeadm's token discovery fetches cluster-info; nothing secret is
    # sent and the answer is only trusted if the token's signature matches.
    client = read_only_client(Credentials(f"https://{endpoint}", insecure=True),
                              DISCOVERY_TIMEOUT)
    try:
        info = client.get("/api/v1/namespaces/kube-public/configmaps/cluster-info")
    except AgentError as err:
        return Check(phase, NAME, "warn", f"token {token_id}: expiry not checked: the "
                     f"workload cluster's cluster-info is not readable ({err.message})",
                     "nothing, if the join has not started yet; otherwise check the route "
                     f"to {endpoint}")
    finally:
        client.session.close()
    data = info.get("data") or {}
    signature = data.get(f"jws-kubeconfig-{token_id}")
    details = {"tokenID": token_id, "source": "cluster-info"}
    if not signature:
        return Check(phase, NAME, "fail", f"token {token_id} is unknown to the workload "
                     "cluster or expired (no JWS signature in cluster-info)", ROTATE, details)
    if not _signed(str(signature), str(data.get("kubeconfig", "")), secret):
        return Check(phase, NAME, "fail", f"token {token_id}: the cluster-info signature "
                     "does not match the token's secret", "check the token in the "
                     "bootstrap data", details)
    return Check(phase, NAME, "pass", f"token {token_id} is known to the workload cluster "
                 "and not expired (cluster-info signed with it)", details=details)


def _signed(jws: str, payload: str, secret: str) -> bool:
    header, _, signature = jws.partition("..")

    def b64(raw: bytes) -> str:
        return base64.urlsafe_b64encode(raw).rstrip(b"=").decode()

    mac = hmac.new(secret.encode(), f"{header}.{b64(payload.encode())}".encode(),
                   hashlib.sha256).digest()
    return hmac.compare_digest(b64(mac), signature)
