"""Plugins from an https URL: TLS verified, checksum checked before anything is written.
A local HTTPS server on 127.0.0.1 with a throwaway self-signed certificate (openssl)."""

from __future__ import annotations

import http.server
import ssl
import subprocess
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from agent.config.cni import PluginSource
from agent.host import Host
from agent.phases.cni.install import BundleError, fetch_bundle, install_change
from tests.cni_fixtures import plugin_bundle, sha256, snapshot


@pytest.fixture
def https_server(tmp_path: Path) -> Iterator[tuple[str, Path, bytes]]:
    """(base URL, the certificate to trust, the bundle it serves)."""
    cert, key = tmp_path / "cert.pem", tmp_path / "key.pem"
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1",
                    "-subj", "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1",
                    "-keyout", str(key), "-out", str(cert)],
                   check=True, capture_output=True, timeout=60)
    site = tmp_path / "site"
    site.mkdir()
    bundle = plugin_bundle(("loopback",))
    (site / "cni.tgz").write_bytes(bundle)

    class Quiet(http.server.SimpleHTTPRequestHandler):
        def __init__(self, *args: object, **kwargs: object) -> None:
            super().__init__(*args, directory=str(site), **kwargs)  # type: ignore[arg-type]

        def log_message(self, *args: object) -> None:
            pass

    server = http.server.HTTPServer(("127.0.0.1", 0), Quiet)
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(cert, key)
    server.socket = context.wrap_socket(server.socket, server_side=True)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"https://127.0.0.1:{server.server_address[1]}", cert, bundle
    finally:
        server.shutdown()
        server.server_close()


@pytest.mark.allow_processes
def test_an_untrusted_certificate_is_refused(tmp_path: Path, https_server: tuple[str, Path, bytes],
                                             monkeypatch: pytest.MonkeyPatch) -> None:
    url, _, bundle = https_server
    monkeypatch.delenv("REQUESTS_CA_BUNDLE", raising=False)
    monkeypatch.delenv("CURL_CA_BUNDLE", raising=False)
    root = tmp_path / "root"
    root.mkdir()
    source = PluginSource(source="url", url=f"{url}/cni.tgz", sha256=sha256(bundle))
    with pytest.raises(BundleError, match=r"TLS verification of https://127\.0\.0\.1"):
        fetch_bundle(Host(root), source)
    assert snapshot(root) == {}


@pytest.mark.allow_processes
def test_a_trusted_download_is_checked_then_installed(
        tmp_path: Path, https_server: tuple[str, Path, bytes],
        monkeypatch: pytest.MonkeyPatch) -> None:
    url, cert, bundle = https_server
    monkeypatch.setenv("REQUESTS_CA_BUNDLE", str(cert))  # trust the test CA, verify stays on
    root = tmp_path / "root"
    root.mkdir()
    wrong = PluginSource(source="url", url=f"{url}/cni.tgz", sha256="f" * 64)
    with pytest.raises(BundleError, match="nothing was installed"):
        fetch_bundle(Host(root), wrong)
    assert snapshot(root) == {}
    host = Host(root)
    got = fetch_bundle(host, PluginSource(source="url", url=f"{url}/cni.tgz",
                                          sha256=sha256(bundle)))
    assert got is not None and sorted(got.files) == ["loopback"]
    change = install_change(host, "/opt/cni/bin", got)
    assert change is not None
    change.action(host)
    assert (root / "opt/cni/bin/loopback").read_bytes() == Path(
        "/usr/lib/cni/loopback").read_bytes()
