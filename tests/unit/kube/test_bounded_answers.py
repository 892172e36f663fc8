"""A management API answer cannot cost the agent without bound: an endless body, one
byte every so often, JSON nested 200,000 deep, an endless watch line and a redirect each
end in an error that says what happened (a plain HTTP server on 127.0.0.1: the bounds
are the transport's, not TLS's)."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from agent.kube import transport
from agent.kube.client import Client
from agent.kube.errors import Unreachable
from agent.kube.kubeconfig import Credentials
from agent.kube.transport import Session, TransportError
from agent.retry import Backoff

DRIPS = 40
"""Bytes the slow server sends at most, 0.1 s apart (it must end even for a client that
would wait for all)."""


class Hostile(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def do_GET(self) -> None:
        path = self.path.split("?")[0]
        if path == "/endless":  # chunked, until the client goes
            self._head(200, chunked=True)
            chunk = b"x" * 65536
            try:
                for _ in range(10_000):
                    self.wfile.write(b"%x\r\n%s\r\n" % (len(chunk), chunk))
            except OSError:
                return
        elif path == "/drip":  # one byte at a time: each read is quick, the whole is not
            self._head(200, length=DRIPS)
            try:
                for _ in range(DRIPS):
                    self.wfile.write(b" ")
                    self.wfile.flush()
                    time.sleep(0.1)
            except OSError:
                return
        elif path == "/deep":
            body = b"[" * 200_000 + b"]" * 200_000
            self._head(200, length=len(body))
            self.wfile.write(body)
        elif path == "/redirect":
            self._head(302, length=0, location="https://elsewhere.example/login")
        elif path == "/longline":  # a watch event without end
            self._head(200, chunked=True)
            try:
                for _ in range(64):
                    self.wfile.write(b"10000\r\n" + b"a" * 65536 + b"\r\n")
            except OSError:
                return

    def _head(self, code: int, *, length: int | None = None, chunked: bool = False,
              location: str | None = None) -> None:
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        if chunked:
            self.send_header("Transfer-Encoding", "chunked")
        if length is not None:
            self.send_header("Content-Length", str(length))
        if location:
            self.send_header("Location", location)
        self.end_headers()

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def server() -> Iterator[str]:
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Hostile)
    httpd.daemon_threads = True
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{httpd.server_address[1]}"
    finally:
        httpd.shutdown()
        httpd.server_close()
        thread.join(timeout=10)


def client(url: str) -> Client:
    return Client(Credentials(url, token="t"), timeout=1.0, backoff=Backoff(0.1, 0.1, 1),
                  sleep=lambda _: None, session=Session())


def test_an_endless_body_is_refused_at_the_bound(
        server: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(transport, "MAX_ANSWER", 1 << 20)
    with pytest.raises(TransportError, match="the answer is larger than 1048576 bytes"):
        Session().request("GET", server + "/endless", timeout=(5.0, 5.0))


def test_a_body_dripping_slowly_ends_at_the_request_time_out(server: str) -> None:
    with pytest.raises(TimeoutError, match=r"no complete answer within 1\.5s"):
        Session().request("GET", server + "/drip", timeout=(0.5, 1.0))


def test_json_nested_200k_deep_is_an_error_not_a_traceback(server: str) -> None:
    with pytest.raises(Unreachable, match="the answer is not JSON"):
        client(server).get("/deep")


def test_a_watch_line_without_end_is_refused_at_the_bound(
        server: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(transport, "MAX_LINE", 1 << 20)
    stream = Session().request("GET", server + "/longline", timeout=(5.0, 5.0), stream=True)
    with pytest.raises(TransportError, match="longer than 1048576 bytes"):
        list(stream.iter_lines())
    stream.close()


def test_a_redirect_says_so_and_where_it_points(server: str) -> None:
    with pytest.raises(Unreachable) as err:
        client(server).get("/redirect")
    assert "answered 302, a redirect to 'https://elsewhere.example/login'" in str(err.value)
    assert "not JSON" not in str(err.value)
    assert "spec.management's server" in (err.value.hint or "")
