"""The agent's HTTPS transport (agent.kube.transport, the standard library's http.client
and ssl in place of requests): one kept-alive connection for many requests, a connection
the server closed is replaced, the server's certificate is verified against the CA given,
answers stream line by line."""

from __future__ import annotations

import ipaddress
import ssl
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import ClassVar

import pytest
from cryptography import x509
from machine_agent_sandbox.testkit.certs import DAY, NOW, make_ca, pem, serving_cert

from agent.kube.transport import Session, TransportError, tls_failure


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive, as kube-apiserver
    connections: ClassVar[list[int]] = []

    def setup(self) -> None:
        super().setup()
        self.connections.append(id(self.connection))

    def do_GET(self) -> None:
        if self.path == "/close":  # answers, then closes: the idle connection is dead
            self.close_connection = True
        if self.path == "/cut":  # promises more than it sends
            self.send_response(200)
            self.send_header("Content-Length", "100")
            self.end_headers()
            self.wfile.write(b"{}")
            self.close_connection = True
            return
        body = b'{"a": 1}\n{"b": 2}\n' if self.path == "/lines" else b'{"ok": true}'
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def server(tmp_path: Path) -> Iterator[tuple[str, Path, list[int]]]:
    """An HTTPS server on 127.0.0.1 with a certificate for that address; (URL, CA file,
    the connections it accepted)."""
    ca = make_ca("transport-ca")
    (tmp_path / "ca.crt").write_bytes(pem(ca.cert))
    chain, key = serving_cert(ca, tmp_path,
                              names=[x509.IPAddress(ipaddress.ip_address("127.0.0.1"))],
                              not_before=NOW - DAY, not_after=NOW + DAY)
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(chain, key)
    connections: ClassVar[list[int]] = []
    handler = type("H", (Handler,), {"connections": connections})
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    httpd.socket = ctx.wrap_socket(httpd.socket, server_side=True)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"https://127.0.0.1:{httpd.server_address[1]}", tmp_path / "ca.crt", connections
    finally:
        httpd.shutdown()
        httpd.server_close()
        thread.join(timeout=10)


def test_requests_share_one_verified_connection(
        server: tuple[str, Path, list[int]]) -> None:
    url, ca, connections = server
    session = Session()
    for _ in range(5):
        answer = session.request("GET", url + "/x", params={"q": "a b"}, verify=str(ca),
                                 timeout=(5.0, 5.0))
        assert answer.status_code == 200 and answer.json() == {"ok": True}
        assert answer.headers.get("content-type") == "application/json"
    assert len(connections) == 1
    session.close()


def test_a_connection_the_server_closed_is_replaced(
        server: tuple[str, Path, list[int]]) -> None:
    url, ca, connections = server
    session = Session()
    assert session.request("GET", url + "/close", verify=str(ca)).status_code == 200
    assert session.request("GET", url + "/x", verify=str(ca)).json() == {"ok": True}
    assert len(connections) == 2


def test_a_server_certificate_from_another_ca_is_refused(
        server: tuple[str, Path, list[int]], tmp_path: Path) -> None:
    url, _, _ = server
    other = tmp_path / "other.crt"
    other.write_bytes(pem(make_ca("someone-else").cert))
    with pytest.raises(OSError) as refused:
        Session().request("GET", url + "/x", verify=str(other), timeout=5.0)
    failure = tls_failure(refused.value)
    assert isinstance(failure, ssl.SSLCertVerificationError)
    assert failure.verify_code == 19  # the chain ends in a CA this node does not trust


def test_the_certificate_must_name_the_host(server: tuple[str, Path, list[int]]) -> None:
    url, ca, _ = server
    with pytest.raises(ssl.SSLCertVerificationError):  # valid for 127.0.0.1 only
        Session(server_name="api.example").request("GET", url + "/x", verify=str(ca))


def test_a_streamed_answer_is_read_by_line_and_a_cut_one_is_an_oserror(
        server: tuple[str, Path, list[int]]) -> None:
    url, ca, _ = server
    session = Session()
    stream = session.request("GET", url + "/lines", verify=str(ca), stream=True)
    assert list(stream.iter_lines()) == [b'{"a": 1}', b'{"b": 2}']
    stream.close()
    with pytest.raises(TransportError):
        session.request("GET", url + "/cut", verify=str(ca))
