"""One value from several sources resolves as agent/config/sources/chain.py documents:
defaults < baked file < drop-ins < cloud-init < kernel command line (its file, then its
parameter) < --config — and `config show --origin` names the winner."""

from __future__ import annotations

from pathlib import Path

import pytest

from agent.cli import main
from tests.integration.identity.nocloud import agent_user_data, nocloud_root

META = "instance-id: iid-7\n"


def doc(max_offset: str) -> str:
    return ("apiVersion: machine-agent.io/v1alpha1\nkind: AgentConfig\n"
            f"spec:\n  time:\n    maxOffset: {max_offset}\n")


def shown_max_offset(root: Path, capsys: pytest.CaptureFixture[str], *extra: str) -> str:
    capsys.readouterr()
    assert main(["--root", str(root), "config", "show", "--origin", *extra]) == 0
    return next(line for line in capsys.readouterr().out.splitlines()
                if line.startswith("spec.time.maxOffset = "))


def test_the_same_value_from_every_source_resolves_as_documented(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    root = tmp_path / "root"
    (root / "etc/machine-agent/config.d").mkdir(parents=True)
    (root / "etc/machine-agent/config.yaml").write_text(doc("10ms"))
    assert shown_max_offset(root, capsys) == \
        'spec.time.maxOffset = "10ms"  # /etc/machine-agent/config.yaml'
    (root / "etc/machine-agent/config.d/50-site.yaml").write_text(doc("20ms"))
    assert shown_max_offset(root, capsys) == \
        'spec.time.maxOffset = "20ms"  # /etc/machine-agent/config.d/50-site.yaml'

    nocloud_root(root, META, agent_user_data(doc("30ms")))
    assert shown_max_offset(root, capsys) == \
        'spec.time.maxOffset = "30ms"  # cloud-init user-data (part machine-agent.yaml)'

    (root / "boot.yaml").write_text(doc("40ms"))
    (root / "proc").mkdir()
    (root / "proc/cmdline").write_text("ro machine-agent.config=/boot.yaml\n")
    assert shown_max_offset(root, capsys) == \
        'spec.time.maxOffset = "40ms"  # kernel command line machine-agent.config=/boot.yaml'

    (tmp_path / "mine.yaml").write_text(doc("50ms"))
    assert shown_max_offset(root, capsys, "--config", str(tmp_path / "mine.yaml")) == \
        f'spec.time.maxOffset = "50ms"  # {tmp_path / "mine.yaml"}'

    # Without the kernel command line, cloud-init is the highest local source again.
    (root / "proc/cmdline").write_text("ro quiet\n")
    assert shown_max_offset(root, capsys).endswith(
        "# cloud-init user-data (part machine-agent.yaml)")
