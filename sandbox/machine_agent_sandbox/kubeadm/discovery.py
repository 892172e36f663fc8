"""kubeadm's validation of a JoinConfiguration's discovery (kubernetes/kubernetes
cmd/kubeadm/app/apis/kubeadm/validation/validation.go)."""

from __future__ import annotations

from typing import Any


def unpinned_token_discovery(token: Any) -> str | None:
    """ValidateDiscoveryBootstrapToken: token discovery without caCertHashes trusts any
    API server, so kubeadm refuses it unless unsafeSkipCAVerification says otherwise
    (its field error, returned before any phase runs)."""
    if not isinstance(token, dict):
        return None
    if token.get("caCertHashes") or token.get("unsafeSkipCAVerification") is True:
        return None
    return ("discovery.bootstrapToken.caCertHashes: Invalid value: \"\": using token-based "
            "discovery without caCertHashes can be unsafe. Set unsafeSkipCAVerification as "
            "true in your kubeadm config file or pass "
            "--discovery-token-unsafe-skip-ca-verification flag to continue")
