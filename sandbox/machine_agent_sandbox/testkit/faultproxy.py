"""A fault-injecting HTTPS proxy that the management-cluster tests put in front of
whichever API server they use (the stand-in, or a real cluster through
MACHINE_AGENT_TEST_KUBECONFIG), so faults never depend on stand-in-only hooks.

The agent is pointed at the proxy (its own CA, on 127.0.0.1); the proxy forwards every
request, Authorization header included, to the upstream server over verified TLS and
streams the answer back (watches line by line). Faults (machine_agent_sandbox's Fault
model: method, path regex, count) change that on the way:

- `drop`: close the connection without answering; `reset`: close it with a TCP RST;
- `latency`: hold the request back `seconds`;
- `500`, `503`: an error Status, as an overloaded or failing server sends;
- `429`: TooManyRequests with `Retry-After: retry_after` (API Priority and Fairness);
- `close_watch`: a watch stream ends cleanly after `after_events` events;
- `410`: a LIST answers 410 Expired; a WATCH 200 then one ERROR event with a 410 Status,
  the shapes a real server sends after etcd compaction (corpus case m).

Requests are counted by (verb, resource) as they pass, e.g. ("watch", "secrets").
"""

from __future__ import annotations

import contextlib
import json
import socket
import ssl
import struct
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl, urlsplit

import requests

from machine_agent_sandbox.apiserver.auth import generate_tls
from machine_agent_sandbox.apiserver.faults import Counters, Fault, Faults

_HOP_BY_HOP = {"connection", "keep-alive", "transfer-encoding", "content-length",
               "proxy-connection", "upgrade", "te", "trailer"}


def _status(code: int, reason: str, message: str, details: dict[str, Any] | None = None
            ) -> bytes:
    body: dict[str, Any] = {"kind": "Status", "apiVersion": "v1", "metadata": {},
                            "status": "Failure", "message": message, "reason": reason,
                            "code": code}
    if details:
        body["details"] = details
    return json.dumps(body).encode()


def verb_and_resource(method: str, path: str, query: dict[str, str]) -> tuple[str, str]:
    """("watch", "secrets"), ("patch", "machines/status"), ... for a resource path."""
    parts = [p for p in path.split("/") if p]
    rest = parts[2:] if parts[:1] == ["api"] else parts[3:] if parts[:1] == ["apis"] else []
    if len(rest) >= 2 and rest[0] == "namespaces" and len(rest) > 2:
        rest = rest[2:]
    if not rest:
        return method.lower(), path
    name = rest[1] if len(rest) > 1 else ""
    resource = "/".join([rest[0], *rest[2:3]])
    if method == "GET":
        verb = "watch" if query.get("watch") in ("1", "true") else "get" if name else "list"
    else:
        verb = {"POST": "create", "PUT": "update", "PATCH": "patch",
                "DELETE": "delete" if name else "deletecollection"}.get(method, method.lower())
    return verb, resource


class FaultProxy:
    def __init__(self, upstream: str, verify: str | bool, state_dir: Path,
                 cert: tuple[str, str] | None = None) -> None:
        self.upstream = upstream.rstrip("/")
        self.faults = Faults()
        self._counters = Counters()
        self._session = requests.Session()
        self._session.trust_env = False  # REQUESTS_CA_BUNDLE would override verify
        self._session.verify = verify
        self._cert = cert
        self._tls = generate_tls(state_dir, [])
        self.ca_path = self._tls.ca_path
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None
        self._open: set[socket.socket] = set()
        self._lock = threading.Lock()

    # --- lifecycle ------------------------------------------------------------------

    def start(self) -> FaultProxy:
        proxy = self

        class Server(ThreadingHTTPServer):
            daemon_threads = True

            def process_request(self, request: Any, client_address: Any) -> None:
                with proxy._lock:
                    proxy._open.add(request)
                super().process_request(request, client_address)

            def shutdown_request(self, request: Any) -> None:
                with proxy._lock:
                    proxy._open.discard(request)
                super().shutdown_request(request)

        server = Server(("127.0.0.1", 0), _handler(self))
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.load_cert_chain(self._tls.cert_path, self._tls.key_path)
        server.socket = context.wrap_socket(server.socket, server_side=True)
        self._server = server
        self._thread = threading.Thread(target=server.serve_forever,
                                        kwargs={"poll_interval": 0.1}, daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self.cut()
        if self._thread is not None:
            self._thread.join(timeout=5)
        self._session.close()

    def __enter__(self) -> FaultProxy:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def url(self) -> str:
        assert self._server is not None, "start() the proxy first"
        return f"https://127.0.0.1:{self._server.server_address[1]}"

    def cut(self) -> None:
        """End every open connection now (watches included): an outage, a restart."""
        with self._lock:
            conns = list(self._open)
        for conn in conns:
            with contextlib.suppress(OSError):
                conn.shutdown(socket.SHUT_RDWR)

    def counters(self) -> dict[tuple[str, str], int]:
        """Requests that reached the proxy so far, by (verb, resource)."""
        return self._counters.snapshot()

    def reset_counters(self) -> None:
        self._counters.reset()

    # --- one request ------------------------------------------------------------------

    def handle(self, h: BaseHTTPRequestHandler, method: str) -> None:
        url = urlsplit(h.path)
        query = dict(parse_qsl(url.query, keep_blank_values=True))
        length = int(h.headers.get("Content-Length") or 0)
        body = h.rfile.read(length) if length else b""
        verb, resource = verb_and_resource(method, url.path, query)
        self._counters.count(verb, resource)
        fault = self.faults.take(method, url.path, ("latency",))
        if fault is not None:
            time.sleep(fault.seconds)
        fault = self.faults.take(method, url.path, ("drop", "reset", "500", "503", "429"))
        if fault is not None:
            self._inject(h, fault)
            return
        watching = verb == "watch"
        if self.faults.take(method, url.path, ("410",)) is not None and verb in ("list",
                                                                                "watch"):
            self._gone(h, watching)
            return
        closing = self.faults.take(method, url.path, ("close_watch",)) if watching else None
        headers = {k: v for k, v in h.headers.items()
                   if k.lower() not in _HOP_BY_HOP and k.lower() != "host"}
        try:
            # The admin's client certificate only for a caller without credentials of its
            # own: a server authenticates the certificate before a bearer token, so sent
            # along it would make every proxied caller the admin.
            own = any(k.lower() == "authorization" for k in headers)
            upstream = self._session.request(method, self.upstream + h.path, data=body,
                                             headers=headers, stream=True,
                                             cert=None if own else self._cert,
                                             timeout=(10, None if watching else 60))
        except requests.RequestException:
            h.close_connection = True
            self._abort(h, reset=False)
            return
        with upstream:
            try:
                self._relay(h, upstream, closing)
            except OSError:  # the client went away (its own time-out) before the answer
                h.close_connection = True

    def _inject(self, h: BaseHTTPRequestHandler, fault: Fault) -> None:
        if fault.kind in ("drop", "reset"):
            self._abort(h, reset=fault.kind == "reset")
            return
        if fault.kind == "429":
            data = _status(429, "TooManyRequests",
                           "Too many requests, please try again later.",
                           {"retryAfterSeconds": fault.retry_after})
            self._send(h, 429, data, {"Retry-After": str(fault.retry_after)})
        elif fault.kind == "503":
            self._send(h, 503, _status(503, "ServiceUnavailable",
                                       "the server is currently unable to handle the request"))
        else:
            self._send(h, 500, _status(500, "InternalError",
                                       "Internal error occurred: injected by the test proxy"))

    def _gone(self, h: BaseHTTPRequestHandler, watching: bool) -> None:
        if not watching:
            self._send(h, 410, _status(410, "Expired",
                                       "The resourceVersion for the provided list is too old."))
            return
        event = {"type": "ERROR", "object": json.loads(_status(
            410, "Expired", "too old resource version: 1 (2)"))}
        self._start_chunked(h, 200, {"Content-Type": "application/json"})
        self._chunk(h, json.dumps(event).encode() + b"\n")
        self._chunk(h, b"")

    def _relay(self, h: BaseHTTPRequestHandler, upstream: requests.Response,
               closing: Fault | None) -> None:
        headers = {k: v for k, v in upstream.headers.items() if k.lower() not in _HOP_BY_HOP}
        if upstream.headers.get("Transfer-Encoding", "").lower() != "chunked":
            self._send(h, upstream.status_code, upstream.content, headers)
            return
        self._start_chunked(h, upstream.status_code, headers)
        sent = 0
        try:
            if closing is not None and closing.after_events == 0:
                self._chunk(h, b"")
                return
            for line in _lines(upstream):
                self._chunk(h, line)
                sent += 1
                if closing is not None and sent >= closing.after_events:
                    break
            self._chunk(h, b"")
        except OSError:
            h.close_connection = True

    # --- writing ------------------------------------------------------------------------

    def _send(self, h: BaseHTTPRequestHandler, code: int, data: bytes,
              headers: dict[str, str] | None = None) -> None:
        h.send_response(code)
        sent = {k.lower() for k in (headers or {})}
        if "content-type" not in sent:
            h.send_header("Content-Type", "application/json")
        for key, value in (headers or {}).items():
            h.send_header(key, value)
        h.send_header("Content-Length", str(len(data)))
        h.end_headers()
        h.wfile.write(data)

    def _start_chunked(self, h: BaseHTTPRequestHandler, code: int,
                       headers: dict[str, str]) -> None:
        h.send_response(code)
        for key, value in headers.items():
            h.send_header(key, value)
        h.send_header("Transfer-Encoding", "chunked")
        h.end_headers()
        h.wfile.flush()

    @staticmethod
    def _chunk(h: BaseHTTPRequestHandler, data: bytes) -> None:
        h.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))
        h.wfile.flush()

    @staticmethod
    def _abort(h: BaseHTTPRequestHandler, reset: bool) -> None:
        h.close_connection = True
        conn = h.connection
        with contextlib.suppress(OSError):
            if reset:  # linger 0: close() sends RST, as a crashed peer or a middlebox does
                conn.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
                conn.close()
            else:
                conn.shutdown(socket.SHUT_RDWR)


def _lines(resp: requests.Response) -> Iterator[bytes]:
    """The stream's lines as they arrive, each with its newline."""
    for line in resp.iter_lines(chunk_size=1):
        if line:
            yield line + b"\n"


def _handler(proxy: FaultProxy) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"
        disable_nagle_algorithm = True

        def log_message(self, format: str, *args: Any) -> None:
            pass

        def do_GET(self) -> None:
            proxy.handle(self, "GET")

        def do_POST(self) -> None:
            proxy.handle(self, "POST")

        def do_PUT(self) -> None:
            proxy.handle(self, "PUT")

        def do_PATCH(self) -> None:
            proxy.handle(self, "PATCH")

        def do_DELETE(self) -> None:
            proxy.handle(self, "DELETE")

    return Handler
