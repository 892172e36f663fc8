"""HTTPS handling: decode a request, count it, inject faults, authenticate, authorize,
dispatch to the verbs, and write JSON (or a chunked watch stream) back."""

from __future__ import annotations

import contextlib
import datetime
import json
import logging
import socket
import ssl
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qsl, urlsplit

from . import decoding, discovery, protobuf, reviews, routes, sandboxapi, tables, watch
from . import status as st
from .auth import ANONYMOUS_USER, User
from .calls import Call, Reply
from .clientcerts import user_of
from .context import Context
from .faults import Fault
from .rbac import Attributes, denial

Obj = dict[str, Any]
log = logging.getLogger(__name__)

SSAR_PATH = "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews"
SSRR_PATH = "/apis/authorization.k8s.io/v1/selfsubjectrulesreviews"
SSR_PATH = "/apis/authentication.k8s.io/v1/selfsubjectreviews"
_REVIEWS = (SSAR_PATH, SSRR_PATH, SSR_PATH)
_OPEN_PATHS = {"/healthz", "/livez", "/readyz"}
TOKEN_LEEWAY = 60.0
"""go-jose's jwt.DefaultLeeway: a ServiceAccount deleted less than this long ago (still
terminating) keeps its tokens valid."""


def _epoch(timestamp: str) -> float:
    return datetime.datetime.strptime(timestamp, "%Y-%m-%dT%H:%M:%SZ").replace(
        tzinfo=datetime.UTC).timestamp()


class Server(ThreadingHTTPServer):
    daemon_threads = True
    block_on_close = False

    def __init__(self, address: tuple[str, int], ctx: Context) -> None:
        super().__init__(address, Handler)
        self.ctx = ctx
        self._open: set[socket.socket] = set()
        self._open_lock = threading.Lock()

    def process_request(self, request: Any, client_address: Any) -> None:
        with self._open_lock:
            self._open.add(request)
        super().process_request(request, client_address)

    def shutdown_request(self, request: Any) -> None:
        with self._open_lock:
            self._open.discard(request)
        super().shutdown_request(request)

    def close_connections(self) -> None:
        """End every open connection (idle keep-alives and watches) at stop()."""
        with self._open_lock:
            conns = list(self._open)
        for conn in conns:
            with contextlib.suppress(OSError):
                conn.shutdown(socket.SHUT_RDWR)


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    timeout = 300  # idle keep-alive connections are closed, as servers do
    # A reply is written as headers, then body: with Nagle on, the body waits for the
    # client's delayed ACK of the headers (40 ms on Linux) on every request.
    disable_nagle_algorithm = True
    # Headers and body leave in one TLS record and one send (each reply flushes): written
    # unbuffered, they were two, and sending was a fifth of the stand-in's time under a
    # fleet's load.
    wbufsize = 1 << 16
    server_version = "machine-agent-sandbox-apiserver"
    server: Server

    def log_message(self, format: str, *args: Any) -> None:
        if log.isEnabledFor(logging.DEBUG):  # formatted per request otherwise
            log.debug("%s %s", self.address_string(), format % args)

    def do_GET(self) -> None:
        self._serve("GET")

    def do_POST(self) -> None:
        self._serve("POST")

    def do_PUT(self) -> None:
        self._serve("PUT")

    def do_PATCH(self) -> None:
        self._serve("PATCH")

    def do_DELETE(self) -> None:
        self._serve("DELETE")

    # --- plumbing --------------------------------------------------------------------

    def _body(self) -> bytes:
        length = int(self.headers.get("Content-Length") or 0)
        return self.rfile.read(length) if length else b""

    def _json_body(self, raw: bytes) -> Any:
        if not raw.strip():
            return None
        try:
            return json.loads(raw)
        except ValueError as exc:
            raise st.bad_request(f"couldn't get version/kind; json parse error: {exc}") from None

    def _options_body(self, raw: bytes) -> Any:
        """DeleteOptions: JSON, or protobuf as controller-runtime sends them."""
        if self.headers.get("Content-Type", "").startswith(protobuf.MEDIA_TYPE):
            return protobuf.delete_options(raw)
        return self._json_body(raw)

    def _reply(self, code: int, body: Obj, headers: dict[str, str] | None = None,
               warnings: list[str] | None = None,
               content_type: str = "application/json") -> None:
        data = json.dumps(body, separators=(",", ":")).encode()
        self.send_response(code)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(data)))
        self.send_header("Cache-Control", "no-cache, private")
        for key, value in (headers or {}).items():
            self.send_header(key, value)
        for w in warnings or []:
            self.send_header("Warning", f'299 - {json.dumps(w)}')
        self.end_headers()
        self.wfile.write(data)
        self.wfile.flush()

    def _drop(self) -> None:
        self.close_connection = True
        with contextlib.suppress(OSError):
            self.connection.shutdown(socket.SHUT_RDWR)

    def _user(self) -> User:
        # kube-apiserver's authenticators in order: a verified client certificate first
        # (x509), then a bearer token.
        peer = self.connection.getpeercert() if isinstance(self.connection,
                                                           ssl.SSLSocket) else None
        by_certificate = user_of(peer)
        if by_certificate is not None:
            return by_certificate
        header = self.headers.get("Authorization", "")
        if not header:
            return ANONYMOUS_USER
        scheme, _, token = header.partition(" ")
        ctx = self.server.ctx
        token = token.strip()
        user = ctx.tokens.user(token) if scheme.lower() == "bearer" else None
        if user is None or not self._account_alive(token):
            raise st.unauthorized()
        return user

    def _account_alive(self, token: str) -> bool:
        """A ServiceAccount token is refused once its account is gone or replaced
        (another uid), or has been terminating for longer than the JWT leeway, as
        kube-apiserver's token validator does (pkg/serviceaccount/claims.go)."""
        bound = self.server.ctx.tokens.bound_to(token)
        if bound is None:
            return True
        account = self.server.ctx.objects.store.get("/serviceaccounts", bound.namespace,
                                                    bound.name)
        meta = (account or {}).get("metadata") or {}
        if meta.get("uid") != bound.uid:
            return False
        deleted = meta.get("deletionTimestamp")
        return not deleted or time.time() - _epoch(deleted) <= TOKEN_LEEWAY

    # --- the request -------------------------------------------------------------------

    def _serve(self, method: str) -> None:
        ctx = self.server.ctx
        url = urlsplit(self.path)
        path = url.path.rstrip("/") or "/"
        query = dict(parse_qsl(url.query, keep_blank_values=True))
        raw = self._body()
        parts = [p for p in path.split("/") if p]
        try:
            special = path in _OPEN_PATHS or parts[:1] == ["sandbox"] or path in _REVIEWS
            target = None
            if not special and parts:
                watching = query.get("watch", "").lower() in ("1", "true")
                try:
                    target = routes.resolve(ctx.objects.registry, method, parts, watching)
                except st.ApiError:
                    ctx.counters.count(method.lower(), path)
                    raise
            ctx.counters.count(target.verb if target else method.lower(),
                               target.counted if target else path)
            if self._faulted(method, path):
                return
            user = self._user()
            if path in _OPEN_PATHS:
                self._send_text("ok")
                return
            if parts[:1] == ["sandbox"]:
                code, body = sandboxapi.handle(ctx, user, method, parts, self._json_body(raw))
                self._reply(code, body)
                return
            if path in _REVIEWS:
                self._review(path, method, user, query, raw)
                return
            if target is None:
                if method != "GET":
                    raise st.method_not_allowed()
                if self._other_documents(parts):
                    return
                doc = routes.discovery(ctx.objects.registry, parts, ctx.address)
                if doc is None:
                    raise routes.not_found()
                self._reply(200, doc)
                return
            self._resource(target, user, query, raw)
        except st.ApiError as err:
            if err.plain:
                self._send_text("404 page not found\n", 404)
            else:
                self._reply(err.code, err.body(), err.headers)
        except (BrokenPipeError, ConnectionResetError):
            self.close_connection = True
        except Exception as exc:  # a bug here must still answer like a server would
            log.exception("sandbox apiserver: %s %s failed", method, self.path)
            failure = st.internal(f"{type(exc).__name__}: {exc}")
            self._reply(failure.code, failure.body())

    def _other_documents(self, parts: list[str]) -> bool:
        """Aggregated discovery (by Accept) and the OpenAPI v3 index and documents."""
        registry = self.server.ctx.objects.registry
        if parts == ["apis"] and "as=APIGroupDiscoveryList" in self.headers.get("Accept", ""):
            self._reply(200, discovery.aggregated(registry),
                        content_type=discovery.AGGREGATED)
            return True
        if parts == ["openapi", "v3"]:
            # the real index is served as a file: text/plain
            self._send_text(json.dumps(discovery.openapi_index(registry)))
            return True
        if parts[:2] == ["openapi", "v3"]:
            doc = discovery.openapi_document(registry, "/".join(parts[2:]))
            if doc is None:
                raise routes.not_found()
            self._reply(200, doc)
            return True
        return False

    def _review(self, path: str, method: str, user: User, query: dict[str, str],
                raw: bytes) -> None:
        """The create-only review resources every authenticated user may post."""
        if method != "POST":
            raise st.method_not_allowed()
        ctx = self.server.ctx
        body = self._json_body(raw)
        if path == SSR_PATH:
            self._reply(201, reviews.self_subject_review(user))
            return
        if path == SSRR_PATH:
            self._reply(201, reviews.self_subject_rules_review(ctx.authorizer, user, body))
            return
        manager = (query.get("fieldManager")
                   or self.headers.get("User-Agent", "").split("/")[0][:128] or "unknown")
        self._reply(201, reviews.self_subject_access_review(ctx.authorizer, user, body,
                                                            manager))

    def _send_text(self, text: str, code: int = 200) -> None:
        data = text.encode()
        self.send_response(code)
        self.send_header("Content-Type", "text/plain; charset=utf-8")
        if code != 200:
            self.send_header("X-Content-Type-Options", "nosniff")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)
        self.wfile.flush()

    def _faulted(self, method: str, path: str) -> bool:
        faults = self.server.ctx.faults
        fault = faults.take(method, path, ("latency",))
        if fault is not None:
            time.sleep(fault.seconds)
        fault = faults.take(method, path, ("drop", "429", "500"))
        if fault is None:
            return False
        if fault.kind == "drop":
            self._drop()
        elif fault.kind == "429":
            raise st.too_many_requests(fault.retry_after)
        else:
            raise st.internal("injected fault")
        return True

    def _resource(self, t: routes.Target, user: User, query: dict[str, str],
                  raw: bytes) -> None:
        ctx = self.server.ctx
        # kube-apiserver takes a list/watch's name from an exact `metadata.name` field
        # selector (k8s.io/apiserver handlers/get.go: "the value of that field is
        # propagated to requestInfo as the name parameter"), so resourceNames rules can
        # allow watching one object.
        name = t.name
        if not name and t.verb in ("list", "watch"):
            terms = [term.split("=", 1) for term in query.get("fieldSelector", "").split(",")]
            if len(terms) == 1 and len(terms[0]) == 2 and \
                    terms[0][0] == "metadata.name":
                name = terms[0][1]
        attrs = Attributes(t.verb, t.res.group, t.res.plural, t.subresource, t.namespace,
                           name)
        if not ctx.authorizer.authorize(user, attrs).allowed:
            raise st.forbidden(t.res.gr, t.res.group, t.res.plural, t.name or None,
                               denial(user, attrs))
        call = Call(t.verb, t.res, t.version, t.namespace, t.name, t.subresource, query, user,
                    self.headers.get("User-Agent", ""))
        if t.version in t.res.deprecation:
            call.warnings.append(t.res.deprecation[t.version])
        objects = ctx.objects
        reply: Reply
        if t.verb == "watch":
            self._watch(call)
            return
        if t.verb == "get":
            reply = objects.get(call)
        elif t.verb == "list":
            if ctx.faults.take("GET", self.path.split("?")[0], ("410",)):
                raise st.expired("The resourceVersion for the provided list is too old.")
            reply = objects.list(call)
        elif t.verb == "create" and t.subresource == "token":
            reply = Reply(201, reviews.token_request(objects.store, ctx.tokens, t.namespace,
                                                     t.name, self._json_body(raw)))
        elif t.verb == "create" and not t.name:
            reply = objects.create(call, self._object_body(raw, t))
        elif t.verb == "update":
            reply = objects.update(call, self._object_body(raw, t))
        elif t.verb == "patch":
            reply = objects.patch(call, raw, self.headers.get("Content-Type", ""))
        elif t.verb == "delete":
            options = self._options_body(raw)
            reply = objects.delete(call, options if isinstance(options, dict) else None)
        elif t.verb == "deletecollection":
            options = self._options_body(raw)
            reply = objects.delete_collection(call, options if isinstance(options, dict)
                                              else None)
        else:
            raise st.method_not_allowed()
        if t.verb in ("get", "list") and t.res.custom and \
                tables.wanted(self.headers.get("Accept", "")):
            reply = Reply(reply.code, tables.to_table(t.res, t.version, reply.body))
        self._reply(reply.code, reply.body, warnings=call.warnings)

    def _object_body(self, raw: bytes, t: routes.Target) -> Any:
        return decoding.object_body(raw, self.headers.get("Content-Type", ""), t.res.kind)

    def _watch(self, call: Call) -> None:
        ctx = self.server.ctx
        path = self.path.split("?")[0]
        closing: Fault | None = ctx.faults.take("GET", path, ("close_watch",))
        gone = ctx.faults.take("GET", path, ("410",)) is not None
        watch.validate(call)  # 500 for a bad resourceVersion, 422 for bad options
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Transfer-Encoding", "chunked")
        self.send_header("Cache-Control", "no-cache, private")
        for w in call.warnings:
            self.send_header("Warning", f'299 - {json.dumps(w)}')
        self.end_headers()
        self.wfile.flush()

        def send(frame: Obj) -> bool:
            data = watch.encode(frame)
            try:
                self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))
                self.wfile.flush()
                return True
            except OSError:
                return False

        opts = watch.WatchOptions(ctx.bookmark_interval, ctx.stop,
                                  closing.after_events if closing else None, gone)
        watch.run(ctx.objects, call, send, opts)
        try:
            self.wfile.write(b"0\r\n\r\n")
            self.wfile.flush()
        except OSError:
            self.close_connection = True
