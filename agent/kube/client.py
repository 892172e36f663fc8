"""A small client for the management cluster's API, on the standard library's HTTPS
(agent.kube.transport; a requests.Session can be handed in instead, as tests do).

Every request carries a time-out and `verify=` explicitly, and the environment is never
read (REQUESTS_CA_BUNDLE, proxies and friends cannot change TLS behind the agent's back).
No answer, 429 and 5xx are retried with jittered exponential backoff (agent.retry),
honouring Retry-After; other failures raise at once as typed errors (agent.kube.errors).
Headers and bodies are never logged: they may hold the token or a Secret.
"""

from __future__ import annotations

import contextlib
import json
import logging
import socket
import time
from collections.abc import Callable, Iterator, Mapping
from typing import TYPE_CHECKING, Any
from urllib.parse import quote

from agent import __version__
from agent.errors import shown
from agent.kube.bearer import read_token_file
from agent.kube.bounded import loads
from agent.kube.errors import Unreachable, error_from_status
from agent.kube.kubeconfig import Credentials, proxy_settings
from agent.kube.transport import Session
from agent.logs import REDACT
from agent.retry import Backoff, retry
from agent.tls import Trust, default_bundle, explain

if TYPE_CHECKING:
    from agent.kube.transport import Answer

log = logging.getLogger(__name__)

FIELD_MANAGER = "machine-agent"
APPLY_PATCH = "application/apply-patch+yaml"
DEFAULT_BACKOFF = Backoff(base=0.25, cap=10.0, attempts=6)
OUTAGE_CAP = 60.0
"""The longest pause between retries while the server has been unanswering for a while.

Every call's retries start again from DEFAULT_BACKOFF's short pauses, so after an outage
each node that was waiting on the server came back within ~10 s of its end, all
together, and did its held-up work at once (bench/README.md, fleet: 1.6x the steady
rate in the minute after a 60 s outage). While the server gives no answer, a retry's
pause is instead drawn from up to as long as it has been unanswering (full jitter, at
most OUTAGE_CAP): after a 60 s outage the nodes come back spread over a minute. The
streak is the client's, across calls, and ends with any answer."""
WATCH_SLACK = 10.0
"""Seconds a watch's read time-out exceeds its server-side `timeoutSeconds`."""

Object = dict[str, Any]


def resource_path(group: str, version: str, plural: str, *, namespace: str | None = None,
                  name: str | None = None, subresource: str | None = None) -> str:
    """`/api/v1/namespaces/NS/secrets/NAME` or `/apis/GROUP/VERSION/...`."""
    parts = ["/api", version] if not group else ["/apis", group, version]
    if namespace is not None:
        parts += ["namespaces", quote(namespace, safe="")]
    parts.append(plural)
    if name is not None:
        parts.append(quote(name, safe=""))
    if subresource is not None:
        parts.append(subresource)
    return "/".join(parts)


def _retry_after(value: str | None) -> float | None:
    """Retry-After in seconds; the HTTP-date form is not used by kube-apiserver."""
    try:
        return max(0.0, float(value)) if value else None
    except ValueError:
        return None


class Client:
    """Requests to one API server with one identity."""

    def __init__(self, creds: Credentials, *, timeout: float = 10.0,
                 backoff: Backoff = DEFAULT_BACKOFF,
                 sleep: Callable[[float], None] = time.sleep,
                 session: Any = None, outage_cap: float = OUTAGE_CAP,
                 monotonic: Callable[[], float] = time.monotonic) -> None:
        self.creds = creds
        self.timeout = timeout
        self.backoff = backoff
        self.sleep = sleep
        self.outage_cap = outage_cap
        self.monotonic = monotonic
        self.unanswered_since: float | None = None
        """When the server last stopped answering (None while it answers)."""
        if session is None:
            session = Session()
        if isinstance(session, Session):  # a requests.Session (tests) keeps its own
            session.proxies = proxy_settings(creds)
        # CA bundles and .netrc from the environment must not change what the agent
        # trusts (a requests.Session reads them unless told); proxies are chosen above.
        session.trust_env = False
        if creds.tls_server_name:
            session.server_name = creds.tls_server_name
        self.session = session
        self.headers = {"Accept": "application/json",
                        "User-Agent": f"machine-agent/{__version__}"}
        if creds.token:
            self.headers["Authorization"] = f"Bearer {creds.token}"

    # -- verbs ----------------------------------------------------------------------

    def get(self, path: str) -> Object:
        return self.request("GET", path)

    def list(self, path: str, *, label_selector: str | None = None,
             field_selector: str | None = None) -> tuple[list[Object], str]:
        """The items and the list's resourceVersion (to watch from)."""
        params = {k: v for k, v in (("labelSelector", label_selector),
                                    ("fieldSelector", field_selector)) if v}
        doc = self.request("GET", path, params=params)
        return list(doc.get("items") or []), str(doc.get("metadata", {}).get(
            "resourceVersion", ""))

    def create(self, path: str, obj: Object, *, attempts: int | None = None) -> Object:
        return self.request("POST", path, body=obj, attempts=attempts)

    def delete(self, path: str) -> Object:
        """The Status (no finalizers) or the object with deletionTimestamp set."""
        return self.request("DELETE", path)

    def apply(self, path: str, obj: Object, *, force: bool = False,
              attempts: int | None = None) -> Object:
        """Server-side apply under FIELD_MANAGER (`path` ends in /status for status).

        JSON is YAML, so the object is sent as JSON with the apply-patch content type.
        """
        params = {"fieldManager": FIELD_MANAGER}
        if force:
            params["force"] = "true"
        return self.request("PATCH", path, params=params, body=obj,
                            content_type=APPLY_PATCH, attempts=attempts)

    # -- transport ------------------------------------------------------------------

    def request(self, method: str, path: str, *, params: Mapping[str, str] | None = None,
                body: Object | None = None, content_type: str = "application/json",
                attempts: int | None = None) -> Object:
        """One API call with retries; the decoded JSON answer."""
        backoff = self.backoff if attempts is None else Backoff(
            self.backoff.base, self.backoff.cap, attempts)

        def once() -> Object:
            response = self._send(method, path, params, body, content_type, stream=False,
                                  timeout=self.timeout)
            try:
                answer = loads(response.content)
            except ValueError as err:
                raise Unreachable(f"{method} {path}: the answer is not JSON "
                                  f"({response.headers.get('Content-Type')})") from err
            finally:
                response.close()
            if not isinstance(answer, dict):
                raise Unreachable(f"{method} {path}: the answer is JSON but not an object")
            return answer

        return retry(once, backoff, sleep=self.sleep, on_retry=self._log_retry,
                     ceiling=self._outage_ceiling)

    def watch_stream(self, path: str, params: Mapping[str, str], timeout_seconds: int,
                     on_open: Callable[[Callable[[], None]], None] | None = None,
                     ) -> Iterator[Object]:
        """Open one watch (with retries) and yield its events until the server ends it.

        A connection that breaks mid-stream just ends the iteration: the caller
        reconnects from the last resourceVersion it saw. `on_open` receives, once the
        server answered, a function that ends the stream from another thread at once
        (it shuts the connection down, waking a read blocked in the kernel).
        """
        query = {**params, "watch": "true", "timeoutSeconds": str(timeout_seconds)}
        response = retry(
            lambda: self._send("GET", path, query, None, "application/json", stream=True,
                               timeout=timeout_seconds + WATCH_SLACK),
            self.backoff, sleep=self.sleep, on_retry=self._log_retry,
            ceiling=self._outage_ceiling)
        if on_open is not None:
            on_open(lambda: _shut_down(response))
        try:
            for line in response.iter_lines():
                if line:
                    yield dict(loads(line))
        except (OSError, ValueError) as err:  # requests' errors are OSErrors too
            log.info("watch %s broke off (%s); reconnecting", path, type(err).__name__)
        finally:
            response.close()

    def _send(self, method: str, path: str, params: Mapping[str, str] | None,
              body: Object | None, content_type: str, *, stream: bool,
              timeout: float, reread_token: bool = True) -> Answer:
        from agent.kube.transport import tls_failure

        headers = dict(self.headers)
        data = None
        if body is not None:
            headers["Content-Type"] = content_type
            data = json.dumps(body).encode()
        what = f"{method} {path}"
        try:
            response: Answer = self.session.request(
                method, self.creds.server + path, params=params, data=data,
                headers=headers, timeout=(min(self.timeout, timeout), timeout),
                verify=self.creds.verify, cert=self.creds.cert, stream=stream,
                allow_redirects=False)
        except OSError as err:  # requests' errors are OSErrors too
            if self.unanswered_since is None:
                self.unanswered_since = self.monotonic()
            if tls_failure(err) is None:
                raise Unreachable(f"{what}: no answer from {self.creds.server}: "
                                  f"{type(err).__name__}: {_short(err)}") from err
            problem, hint = explain(err, _trust(self.creds))
            raise Unreachable(f"{what}: TLS verification of {self.creds.server} failed: "
                              f"{problem}", hint=hint) from err
        self.unanswered_since = None
        log.debug("%s -> %d", what, response.status_code)
        if response.status_code == 401 and reread_token and self._token_rotated():
            response.close()
            log.info("%s: the credential was refused (401); %s holds a new token, sending "
                     "again with it", what, self.creds.token_file)
            return self._send(method, path, params, body, content_type, stream=stream,
                              timeout=timeout, reread_token=False)  # once a request
        if 300 <= response.status_code < 400:  # never followed: the agent's server is set
            location = response.headers.get("Location")
            response.close()
            raise Unreachable(
                f"{what}: {self.creds.server} answered {response.status_code}, a redirect "
                f"to {shown(location or '(no Location)', 200)}, which the agent does not "
                "follow", hint="give the API server's own address (spec.management's "
                "server, or the kubeconfig's), not a proxy or load balancer that redirects")
        if response.status_code < 400:
            return response
        try:
            status = loads(response.content)
        except ValueError:
            status = {"message": response.text[:300]}
        finally:
            response.close()
        raise error_from_status(response.status_code,
                                status if isinstance(status, dict) else None, what,
                                _retry_after(response.headers.get("Retry-After")))

    def _token_rotated(self) -> bool:
        """Read the token file again (client-go's cached file token source does on a
        401); True when it holds another token, which the client now sends."""
        if not self.creds.token_file:
            return False
        try:
            token = read_token_file(self.creds.token_file)
        except (OSError, ValueError) as err:
            log.warning("cannot read the token file %s again: %s", self.creds.token_file,
                        err)
            return False
        REDACT.add(token)
        if self.headers.get("Authorization") == f"Bearer {token}":
            return False
        self.headers["Authorization"] = f"Bearer {token}"
        return True

    def _outage_ceiling(self) -> float:
        """How long the server has been unanswering, at most `outage_cap`."""
        since = self.unanswered_since
        return 0.0 if since is None else min(self.outage_cap, self.monotonic() - since)

    @staticmethod
    def _log_retry(err: Exception, attempt: int, pause: float) -> None:
        log.warning("%s; retrying in %.1fs (attempt %d)", err, pause, attempt + 1)


def _shut_down(response: Answer) -> None:
    """Shut the response's connection down in both directions. The base class's
    shutdown on purpose: ssl.SSLSocket.shutdown also drops its TLS state, which the
    thread blocked in the read still uses; the bare shutdown(2) makes that read return
    end-of-file."""
    sock = getattr(response, "sock", None) or getattr(  # ours, else requests'
        getattr(getattr(response, "raw", None), "connection", None), "sock", None)
    if isinstance(sock, socket.socket):
        with contextlib.suppress(OSError):
            socket.socket.shutdown(sock, socket.SHUT_RDWR)


_CA_HINT = ("give the management cluster's CA: certificate-authority-data in the "
            "kubeconfig, or spec.management.caFile; the agent never skips verification "
            "unless configured to")


def _trust(creds: Credentials) -> Trust:
    """How the client verifies the API server, in the words of spec.management."""
    from urllib.parse import urlsplit

    if creds.tls_server_name:
        name, setting = creds.tls_server_name, "the kubeconfig's tls-server-name"
    else:
        name = urlsplit(creds.server).hostname or creds.server
        setting = "spec.management's server (or the kubeconfig's)"
    return Trust(trusted=creds.ca_file or creds.trust_store or default_bundle(),
                 ca_fix=_CA_HINT, name=name,
                 name_setting=setting, clock_note="; the time phase runs later")


def _short(err: Exception) -> str:
    """The innermost cause's text (requests wraps urllib3 wraps the socket error)."""
    while err.__context__ is not None and isinstance(err.__context__, Exception):
        err = err.__context__
    return str(err)[:300]
