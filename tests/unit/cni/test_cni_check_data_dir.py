"""The check's data directory is only ever the agent's own: a foreign entry that happens
to carry the name the check drew is refused, not used (and later removed)."""

from __future__ import annotations

from pathlib import Path

import pytest

from agent.config.cni import CheckSpec
from agent.host import Host
from agent.phases.cni import check
from agent.phases.cni.check import CNIBrokenError, prove


def test_a_foreign_entry_with_the_drawn_name_is_refused_and_kept(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    foreign = tmp_path / "var/lib/ma-cni-check-0badcafe"
    foreign.mkdir(parents=True)
    (foreign / "data").write_text("keep")  # no marker: not a leftover of the agent's
    monkeypatch.setattr(check.secrets, "token_hex", lambda n: "0badcafe")
    doc = {"cniVersion": "1.0.0", "name": "n", "plugins": [{"type": "loopback"}]}
    with pytest.raises(CNIBrokenError, match="already exists and is not the agent's"):
        prove(Host(tmp_path), doc, "/opt/cni/bin", CheckSpec(data_dir="/var/lib"), [])
    assert sorted(p.name for p in foreign.iterdir()) == ["data"]
    assert (foreign / "data").read_text() == "keep"
