"""kubeletExtraArgs end up in one variable of kubeadm-flags.env that the kubelet unit
splits at white space: a value with a space (or a quote that ends the variable's quoting)
would smuggle another flag past the flag-name check."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from agent.config.sources import FileSource, load_config
from agent.errors import ConfigError
from agent.host import Host


def load(tmp_path: Path, args: dict[str, str]) -> list[str]:
    (tmp_path / "agent.yaml").write_text(yaml.safe_dump({
        "apiVersion": "machine-agent.io/v1alpha1", "kind": "AgentConfig",
        "spec": {"join": {"nodeRegistration": {"kubeletExtraArgs": args}}}}))
    try:
        load_config(Host(tmp_path), [FileSource("/agent.yaml", required=True)])
    except ConfigError as err:
        return [str(e) for e in err.errors]
    return []


@pytest.mark.parametrize("value", ["a=b --kubeconfig=/tmp/x", 'x" --v="9', "x' --v='9",
                                   "x\\ --v=9", "x\\"])
def test_a_value_that_would_become_another_kubelet_flag_is_refused(
        tmp_path: Path, value: str) -> None:
    (error,) = load(tmp_path, {"node-labels": value})
    assert error.startswith("/agent.yaml: spec.join.nodeRegistration.kubeletExtraArgs: "
                            "value of node-labels:")
    assert "would split it into more kubelet flags" in error


def test_one_word_values_and_comma_lists_pass(tmp_path: Path) -> None:
    assert load(tmp_path, {"node-labels": "role=worker,zone=a", "node-ip": "192.0.2.10",
                           "max-pods": "110"}) == []
