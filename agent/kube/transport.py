"""HTTPS for the agent's Kubernetes clients on the standard library (http.client, ssl):
the part of requests.Session they use. Importing requests (with urllib3, idna,
charset_normalizer, http.cookiejar) cost a bootstrap about 60 ms of CPU and 9 MiB of its
peak memory, a third of both, for this one job (bench/README.md).

What it does: keep-alive connections per server (a pool, so a watch and a status apply
from two threads each have one), a connect and a read time-out, TLS verified against the
CA file given (a cluster's CA, or the operating system's trust store that
agent.tls.default_bundle found; with none, OpenSSL's default paths), a client
certificate, a server name other than the URL's host (a kubeconfig's tls-server-name,
also sent as SNI), answers streamed by line (watches), and HTTP proxies (a CONNECT
tunnel for https; which proxy a URL takes is `agent.proxy`'s, decided by the caller from a
kubeconfig's proxy-url and the environment). Every answer is bounded
(agent/kube/bounded.py): its size, a watch line's length, and the time it takes: a
request ends at its connect plus read time-out, however slowly the server sends.
Verification is off only for `verify=False`, which the callers pass only when configured
to. It reads no environment itself (no REQUESTS_CA_BUNDLE, no .netrc) and never follows a
redirect.

Failures are OSErrors (requests' exceptions are too, so a client given a requests
session handles both alike): ssl.SSLError for TLS, TimeoutError, ConnectionError, and
`TransportError` for a malformed or cut answer.
"""

from __future__ import annotations

import contextlib
import http.client
import select
import socket
import ssl
import threading
from collections.abc import Iterator, Mapping
from typing import Any, Protocol
from urllib.parse import urlencode, urlsplit

from agent.kube.bounded import MAX_ANSWER, MAX_LINE, loads
from agent.proxy import NONE, Proxy, ProxySettings


class TransportError(OSError):
    """The server's answer was malformed or cut short."""


class Answer(Protocol):
    """What the clients read of an answer (requests.Response has it too)."""

    status_code: int

    @property
    def headers(self) -> Any:
        """Case-insensitive `.get(name)`: an http.client.HTTPMessage, requests' dict."""

    @property
    def content(self) -> bytes: ...

    @property
    def text(self) -> str: ...

    def json(self) -> Any: ...

    def iter_lines(self) -> Iterator[bytes]: ...

    def close(self) -> None: ...


Timeout = float | tuple[float, float]
"""Seconds, or (connect, read) as requests takes them."""


@contextlib.contextmanager
def _closed_on_failure(conn: http.client.HTTPConnection, what: str) -> Iterator[None]:
    """Any failure closes the connection (its state is unknown, so it is never reused);
    http.client's own errors become TransportError, saying `what` went wrong."""
    try:
        yield
    except http.client.HTTPException as err:
        conn.close()
        raise TransportError(f"{what}: {err!r}") from err
    except BaseException:
        conn.close()
        raise


class _Deadline:
    """Ends a request at its time-out however the server sends (one byte every half
    second never trips a socket's per-read time-out): at the deadline the connection's
    socket is shut down, which wakes any read blocked on it."""

    def __init__(self, conn: http.client.HTTPConnection, seconds: float) -> None:
        self.seconds = seconds
        self.expired = False
        self._conn = conn
        self._timer = threading.Timer(seconds, self._expire)
        self._timer.daemon = True
        self._timer.start()

    def _expire(self) -> None:
        self.expired = True
        sock = self._conn.sock
        if sock is not None:
            with contextlib.suppress(OSError):
                socket.socket.shutdown(sock, socket.SHUT_RDWR)

    def cancel(self) -> None:
        self._timer.cancel()

    def check(self, err: BaseException | None = None) -> None:
        """TimeoutError when the deadline ended the answer (what else failed with it
        was its consequence)."""
        if self.expired:
            raise TimeoutError(f"no complete answer within {self.seconds:g}s") from err


class Response:
    """One answer. Unless streamed, its body is read at once, at most MAX_ANSWER bytes
    and within the request's time-out, and the connection goes back to the pool."""

    def __init__(self, raw: http.client.HTTPResponse, conn: http.client.HTTPConnection,
                 release: Session | None, deadline: _Deadline) -> None:
        self.status_code = raw.status
        self.headers: http.client.HTTPMessage = raw.headers
        self._raw = raw
        self._conn: http.client.HTTPConnection | None = conn
        self._content: bytes | None = None
        self._deadline = deadline
        if release is not None:
            with _closed_on_failure(conn, "the answer was cut short"):
                self._content = self._read_all()
            self._conn = None
            release._give_back(conn, reusable=not raw.will_close)

    def _read_all(self) -> bytes:
        chunks: list[bytes] = []
        size = 0
        try:
            while chunk := self._raw.read1(1 << 16):
                size += len(chunk)
                if size > MAX_ANSWER:
                    raise TransportError(f"the answer is larger than {MAX_ANSWER} bytes")
                chunks.append(chunk)
            if self._raw.length:  # read1 says a cut at EOF by no more than b""
                raise http.client.IncompleteRead(b"".join(chunks), self._raw.length)
            self._raw.read()  # b"" now; marks the answer complete, freeing the connection
        except (OSError, http.client.HTTPException) as err:
            self._deadline.check(err)
            raise
        finally:
            self._deadline.cancel()
        self._deadline.check()
        return b"".join(chunks)

    @property
    def sock(self) -> socket.socket | None:
        """The connection's socket while a streamed answer is open (to shut it down from
        another thread)."""
        return self._conn.sock if self._conn is not None else None

    @property
    def content(self) -> bytes:
        if self._content is None:
            try:
                self._content = self._read_all()
            except http.client.HTTPException as err:
                raise TransportError(f"the answer was cut short: {err!r}") from err
            finally:
                self.close()
        return self._content

    @property
    def text(self) -> str:
        return self.content.decode("utf-8", "replace")

    def json(self) -> Any:
        return loads(self.content)

    def iter_lines(self) -> Iterator[bytes]:
        """The streamed body, line by line, without line ends; a line longer than
        MAX_LINE ends it with a TransportError."""
        try:
            while line := self._raw.readline(MAX_LINE + 1):
                if len(line) > MAX_LINE and not line.endswith(b"\n"):
                    raise TransportError(f"a line of the stream is longer than {MAX_LINE} "
                                         "bytes")
                yield line.rstrip(b"\r\n")
        except (OSError, http.client.HTTPException) as err:
            self._deadline.check(err)
            if isinstance(err, OSError):
                raise
            raise TransportError(f"the stream was cut short: {err!r}") from err
        self._deadline.check()

    def close(self) -> None:
        """A streamed answer's connection is closed, not reused: the rest of its body is
        never read."""
        self._deadline.cancel()
        if self._conn is not None:
            self._conn.close()
            self._conn = None


class _TLSConnection(http.client.HTTPSConnection):
    """HTTPS that verifies the certificate against `server_name` (and sends it as SNI)
    instead of the URL's host when one is given."""

    def __init__(self, host: str, port: int | None, *, timeout: float,
                 context: ssl.SSLContext, server_name: str | None) -> None:
        super().__init__(host, port, timeout=timeout, context=context)
        self.server_name = server_name or host

    def connect(self) -> None:
        http.client.HTTPConnection.connect(self)  # TCP, with TCP_NODELAY
        self.sock = self._context.wrap_socket(  # type: ignore[attr-defined]
            self.sock, server_hostname=self.server_name)


_Key = tuple[str, str, int | None, Any, Any, Proxy | None]
"""A pool's key: scheme, host, port, trust, client certificate, proxy."""


class Session:
    """Connections to the servers asked, kept alive between requests; thread-safe."""

    trust_env = False
    """Never read: the environment cannot change where the agent connects or what it
    trusts (the attribute is requests.Session's, for callers that set it)."""

    def __init__(self, server_name: str | None = None,
                 proxies: ProxySettings = NONE) -> None:
        self.server_name = server_name
        self.proxies = proxies
        self._idle: dict[_Key, list[
            http.client.HTTPConnection]] = {}
        self._contexts: dict[tuple[Any, Any], ssl.SSLContext] = {}
        self._lock = threading.Lock()

    def request(self, method: str, url: str, *, params: Mapping[str, str] | None = None,
                data: bytes | str | None = None, headers: Mapping[str, str] | None = None,
                timeout: Timeout = 10.0, verify: bool | str = True,
                cert: tuple[str, str] | str | None = None, stream: bool = False,
                allow_redirects: bool = False) -> Response:
        """One request, answered (any status) or failed with an OSError. Redirects are
        never followed (`allow_redirects` is accepted for requests' callers)."""
        del allow_redirects
        parts = urlsplit(url)
        if parts.scheme not in ("https", "http") or not parts.hostname:
            raise ValueError(f"not an http(s) URL: {url!r}")
        target = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
        if params:
            target += ("&" if "?" in target else "?") + urlencode(params)
        connect, read = timeout if isinstance(timeout, tuple) else (timeout, timeout)
        proxy = self.proxies.for_url(parts.scheme, parts.hostname, parts.port)
        key = (parts.scheme, parts.hostname, parts.port,
               verify if parts.scheme == "https" else None,
               cert if parts.scheme == "https" else None, proxy)
        if proxy is not None and parts.scheme == "http":
            target = f"http://{parts.netloc}{target}"  # a proxy is asked the absolute URL
        conn = self._take(key) or self._connection(key, connect)
        body = data.encode() if isinstance(data, str) else data
        deadline = _Deadline(conn, connect + read)
        try:
            with _closed_on_failure(conn, "no valid answer"):
                if conn.sock is None:
                    conn.connect()
                assert conn.sock is not None
                conn.sock.settimeout(read)
                conn.request(method, target, body=body, headers=dict(headers or {}))
                raw = conn.getresponse()
        except BaseException as err:
            deadline.cancel()
            deadline.check(err)
            raise
        return Response(raw, conn, None if stream else self, deadline)

    def close(self) -> None:
        with self._lock:
            idle, self._idle = self._idle, {}
        for conns in idle.values():
            for conn in conns:
                conn.close()

    # -- the pool -------------------------------------------------------------------

    def _take(self, key: _Key) -> http.client.HTTPConnection | None:
        with self._lock:
            conns = self._idle.get(key, [])
            while conns:
                conn = conns.pop()
                if not _dropped(conn):
                    return conn
                conn.close()
        return None

    def _give_back(self, conn: http.client.HTTPConnection, *, reusable: bool) -> None:
        key = getattr(conn, "pool_key", None)
        if not reusable or key is None or conn.sock is None:
            conn.close()
            return
        with self._lock:
            self._idle.setdefault(key, []).append(conn)

    def _connection(self, key: _Key, connect_timeout: float) -> http.client.HTTPConnection:
        scheme, host, port, verify, cert, proxy = key
        conn: http.client.HTTPConnection
        # Through a proxy, TCP goes to the proxy; https then tunnels to the server (its
        # certificate verified against the server's name, as without a proxy), http asks
        # the proxy for the absolute URL.
        via_host, via_port = (proxy.host, proxy.port) if proxy else (host, port)
        if scheme == "http":
            conn = http.client.HTTPConnection(via_host, via_port, timeout=connect_timeout)
        else:
            conn = _TLSConnection(via_host, via_port, timeout=connect_timeout,
                                  context=self._context(verify, cert),
                                  server_name=self.server_name or host)
            if proxy is not None:
                conn.set_tunnel(host, port or 443, headers=proxy.headers)
        conn.pool_key = key  # type: ignore[attr-defined]
        return conn

    def _context(self, verify: bool | str, cert: tuple[str, str] | str | None
                 ) -> ssl.SSLContext:
        """One context per trust and client certificate (loading a CA bundle takes a
        few milliseconds; every connection shares it)."""
        with self._lock:
            found = self._contexts.get((verify, cert))
            if found is not None:
                return found
        if verify is False:
            context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
            context.check_hostname = False
            context.verify_mode = ssl.CERT_NONE
        elif verify is True:
            context = ssl.create_default_context()
        else:
            context = ssl.create_default_context(cafile=verify)
        if isinstance(cert, tuple):
            context.load_cert_chain(cert[0], cert[1])
        elif cert:
            context.load_cert_chain(cert)
        with self._lock:
            self._contexts[(verify, cert)] = context
        return context


def _dropped(conn: http.client.HTTPConnection) -> bool:
    """Whether an idle connection was closed by the server (readable at rest: EOF or an
    answer nobody asked for), as urllib3 checks before reusing one."""
    if conn.sock is None:
        return True
    try:
        readable, _, _ = select.select([conn.sock], [], [], 0)
    except (OSError, ValueError):
        return True
    return bool(readable)


def tls_failure(err: BaseException) -> ssl.SSLError | None:
    """The TLS error behind a failed request (this module's or requests'), if any."""
    cause: BaseException | None = err
    seen = 0
    while cause is not None and seen < 20:
        if isinstance(cause, ssl.SSLError):
            return cause
        cause = cause.__cause__ or cause.__context__
        seen += 1
    return None
