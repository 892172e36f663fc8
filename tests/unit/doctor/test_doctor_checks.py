"""Doctor's own logic where no real service is needed: the bootstrap token's expiry and
the IPAM claim lookup through the plugin interface."""

from __future__ import annotations

import base64
import datetime as dt
from pathlib import Path
from typing import Any

import pytest

from agent.config import default_sources, load_config
from agent.doctor import ipam
from agent.host import Host
from agent.ipam.base import Allocation, ClaimRequest
from agent.phases.checks import Doctor
from agent.phases.join.token import _from_secret, _signed

NOW = dt.datetime(2026, 1, 1, 12, 0, tzinfo=dt.UTC)


def secret(expiration: str) -> dict[str, Any]:
    return {"data": {"expiration": base64.b64encode(expiration.encode()).decode()}}


def test_token_expired_per_its_secret_fails_with_the_rotation_fix() -> None:
    check = _from_secret("management", "abcdef", secret("2026-01-01T11:45:00Z"), NOW)
    assert check.status == "fail"
    assert check.seen == "token abcdef expired at 2026-01-01T11:45:00Z"
    assert "bootstrap provider" in check.fix


def test_token_valid_per_its_secret_says_when_it_expires() -> None:
    check = _from_secret("management", "abcdef", secret("2026-01-01T12:10:00Z"), NOW)
    assert check.status == "pass" and "in 10 min" in check.seen


def test_cluster_info_signature_must_be_made_with_the_tokens_secret() -> None:
    # A detached JWS as k8s.io/cluster-bootstrap/token/jws makes it (HS256, kid = id).
    import hashlib
    import hmac

    def b64(raw: bytes) -> str:
        return base64.urlsafe_b64encode(raw).rstrip(b"=").decode()

    header = b64(b'{"alg":"HS256","kid":"abcdef"}')
    payload = "apiVersion: v1\nkind: Config\n"
    mac = hmac.new(b"0123456789abcdef", f"{header}.{b64(payload.encode())}".encode(),
                   hashlib.sha256).digest()
    jws = f"{header}..{b64(mac)}"
    assert _signed(jws, payload, "0123456789abcdef")
    assert not _signed(jws, payload, "0123456789abcdeg")
    assert not _signed(jws, payload + " ", "0123456789abcdef")


class WithLookup:
    def __init__(self, found: Allocation | None) -> None:
        self.found = found
        self.claimed = 0

    def claim(self, request: ClaimRequest) -> Allocation:
        self.claimed += 1
        raise AssertionError("doctor must never claim")

    def lookup(self, request: ClaimRequest) -> Allocation | None:
        assert request.claim_key == "0123abcd/eth0/ipv4"
        return self.found


class ClaimOnly:
    def claim(self, request: ClaimRequest) -> Allocation:
        raise AssertionError("doctor must never claim")


@pytest.fixture
def ipam_doctor(tmp_path: Path) -> Doctor:
    (tmp_path / "etc/machine-agent").mkdir(parents=True)
    (tmp_path / "etc/machine-id").write_text("0123abcd\n")
    (tmp_path / "etc/machine-agent/config.yaml").write_text(
        "apiVersion: machine-agent.io/v1alpha1\nkind: AgentConfig\nspec:\n  network:\n"
        "    interfaces:\n    - name: eth0\n      addresses:\n"
        "      - ipam: {plugin: fake, pool: rack-1}\n")
    host = Host(tmp_path).read_only_view()
    return Doctor(host, [], host, loaded=load_config(host, default_sources()))


@pytest.mark.parametrize(("plugin", "status", "seen"), [
    (WithLookup(Allocation("192.0.2.10", 24, "192.0.2.1", "ipv4")), "pass",
     "192.0.2.10/24 claimed in fake pool 'rack-1'"),
    (WithLookup(None), "warn", "no address claimed yet for 0123abcd/eth0/ipv4 in fake pool "
                               "'rack-1'"),
    (ClaimOnly(), "warn", "not checked: plugin fake has no read-only lookup (agent/ipam/"
                          "base.py defines claim and release only)"),
])
def test_ipam_claim_is_looked_up_never_claimed(ipam_doctor: Doctor, plugin: Any, status: str,
                                               seen: str,
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(ipam, "open_ipam_plugin", lambda ctx, name: plugin)
    checks = {c.name: c for c in ipam.checks(ipam_doctor)}
    assert checks["plugin:fake"].status == "pass"
    assert (checks["claim:eth0/ipv4"].status, checks["claim:eth0/ipv4"].seen) == (status, seen)


def test_unknown_ipam_plugin_fails_naming_the_installed_ones(ipam_doctor: Doctor) -> None:
    checks = {c.name: c for c in ipam.checks(ipam_doctor)}
    assert checks["plugin:fake"].status == "fail"
    assert checks["plugin:fake"].seen == "no IPAM plugin named 'fake'"
    assert checks["plugin:fake"].fix.startswith("installed plugins:")
