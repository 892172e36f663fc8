"""Plugins from an https URL: TLS verified, checksum checked before anything is written.
A local HTTPS server on 127.0.0.1 presenting certificates made with `cryptography`
(the test kit's certs.py); the download trusts requests' CA bundle, or the one REQUESTS_CA_BUNDLE
names, which is how these tests make the node trust their CA."""

from __future__ import annotations

import functools
import re
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from machine_agent_sandbox.testkit.certs import (
    BAD_CERTS,
    HttpsServer,
    Issuer,
    bad_serving_cert,
    good_serving_cert,
    https_server,
    make_ca,
    pem,
)

from agent.config.cni import ManifestSpec, PluginSource
from agent.errors import Reason
from agent.host import Host
from agent.phases.cni.install import BundleError, fetch_bundle, install_change
from agent.phases.cni.manifest import load_manifest
from tests.cni_fixtures import plugin_bundle, sha256, snapshot


@functools.cache
def bundle() -> bytes:
    """The bundle the server serves (built once: its sha256 is in the sources)."""
    return plugin_bundle(("loopback",))


@pytest.fixture
def trusted() -> Issuer:
    """The download server's CA."""
    return make_ca("downloads-ca")


def trust(ca: Issuer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Make requests trust `ca` only (verification stays on)."""
    bundle = tmp_path / "trusted-ca.pem"
    bundle.write_bytes(pem(ca.cert))
    monkeypatch.setenv("REQUESTS_CA_BUNDLE", str(bundle))
    monkeypatch.delenv("CURL_CA_BUNDLE", raising=False)


@contextmanager
def bundle_server(chain: Path, key: Path) -> Iterator[HttpsServer]:
    with https_server(chain, key, body=bundle(), content_type="application/gzip") as server:
        yield server


def source(server: HttpsServer) -> PluginSource:
    return PluginSource(source="url", url=f"{server.url}/cni.tgz", sha256=sha256(bundle()))


def refused(root: Path, server: HttpsServer) -> BundleError:
    """The refusal of a download, checked for what every TLS refusal says."""
    root.mkdir()
    with pytest.raises(BundleError) as caught:
        fetch_bundle(Host(root), source(server))
    err = caught.value
    assert err.reason is Reason.CNIBroken
    assert err.message.startswith(
        f"TLS verification of {server.url}/cni.tgz failed: the server's certificate"), \
        err.message
    assert "Traceback" not in str(err) and "_ssl.c" not in str(err)
    # Refused in the handshake: no request reached the server, nothing was written.
    assert server.seen == []
    assert snapshot(root) == {}
    return err


def test_an_untrusted_certificate_is_refused(tmp_path: Path, trusted: Issuer,
                                             monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("REQUESTS_CA_BUNDLE", raising=False)
    monkeypatch.delenv("CURL_CA_BUNDLE", raising=False)
    with bundle_server(*good_serving_cert(trusted, tmp_path)) as server:
        err = refused(tmp_path / "root", server)
    # requests' own bundle is named: the test CA is not in it.
    assert re.search(r"not signed by a CA this node trusts \(/.*\.pem\)", err.message), \
        err.message
    assert "spec.cni.plugins.source: bundle" in (err.hint or ""), err.hint


CASES: dict[str, tuple[str, str]] = {
    # testkit.certs.BAD_CERTS case: (what the message says, what the hint says)
    "another-ca": (r"not signed by a CA this node trusts \(.*/trusted-ca\.pem\)",
                   "a certificate from a CA in /"),
    "another-ca-same-name": (r"not signed by a CA this node trusts \(.*/trusted-ca\.pem\)",
                             "a certificate from a CA in /"),
    "another-host-name": (r"certificate is not valid for '127\.0\.0\.1'",
                          "spec.cni.plugins.url must name the server by a host name or "
                          "address its certificate lists in subjectAltName"),
    "expired": (r"certificate has expired", "this node's clock is wrong"),
    "not-yet-valid": (r"certificate is not valid yet", "this node's clock is wrong"),
}


@pytest.mark.parametrize("case", list(BAD_CERTS))
def test_a_bad_server_certificate_is_refused_saying_what_is_wrong_and_the_fix(
        case: str, tmp_path: Path, trusted: Issuer, monkeypatch: pytest.MonkeyPatch) -> None:
    says, fix = CASES[case]
    trust(trusted, tmp_path, monkeypatch)
    with bundle_server(*bad_serving_cert(case, trusted, tmp_path)) as server:
        err = refused(tmp_path / "root", server)
    assert re.search(says, err.message), err.message
    assert fix in (err.hint or ""), err.hint


def test_a_manifest_download_names_the_manifest_settings_in_the_fix(
        tmp_path: Path, trusted: Issuer, monkeypatch: pytest.MonkeyPatch) -> None:
    trust(trusted, tmp_path, monkeypatch)
    for case, setting in (("another-host-name", "spec.cni.manifest.url must name"),
                          ("another-ca", "or give the manifest as spec.cni.manifest.file or "
                                         "configMapRef")):
        certs = tmp_path / case
        certs.mkdir()
        with bundle_server(*bad_serving_cert(case, trusted, certs)) as server, \
                pytest.raises(BundleError) as caught:
            load_manifest(Host(tmp_path), ManifestSpec(url=f"{server.url}/cni.yaml",
                                                       sha256="0" * 64))
        assert caught.value.message.startswith(
            f"TLS verification of {server.url}/cni.yaml failed: the server's certificate"), \
            caught.value.message
        assert setting in (caught.value.hint or ""), caught.value.hint
        assert "spec.cni.plugins" not in str(caught.value)
        assert server.seen == []


def test_a_trusted_download_is_checked_then_installed(
        tmp_path: Path, trusted: Issuer, monkeypatch: pytest.MonkeyPatch) -> None:
    trust(trusted, tmp_path, monkeypatch)
    root = tmp_path / "root"
    root.mkdir()
    with bundle_server(*good_serving_cert(trusted, tmp_path)) as server:
        wrong = PluginSource(source="url", url=f"{server.url}/cni.tgz", sha256="f" * 64)
        with pytest.raises(BundleError, match="nothing was installed"):
            fetch_bundle(Host(root), wrong)
        assert snapshot(root) == {}
        host = Host(root)
        got = fetch_bundle(host, source(server))
    assert got is not None and sorted(got.files) == ["loopback"]
    change = install_change(host, "/opt/cni/bin", got)
    assert change is not None
    change.action(host)
    assert (root / "opt/cni/bin/loopback").read_bytes() == Path(
        "/usr/lib/cni/loopback").read_bytes()
