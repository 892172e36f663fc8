"""`machine-agent clean` seals an image as `cloud-init clean` does: the clone of a node
that ran once must bootstrap as a new node, with no state, credentials or logs of the
first; and the commands say in --help what they do."""

from __future__ import annotations

from pathlib import Path

import pytest

from agent.cli import _parser, main
from agent.host import Host
from agent.ipam.base import Allocation
from agent.ipam.ledger import Held, Ledger
from agent.state import Journal

from .test_status import bootstrap, network, time_phase


def agent(root: Path, *args: str) -> int:
    return main(["--root", str(root), *args])


def a_node_that_ran(root: Path) -> None:
    bootstrap(root, [network(), time_phase()])
    (root / "var/lib/machine-agent/credentials").mkdir(mode=0o700)
    (root / "var/lib/machine-agent/credentials/token").write_text("abcdef.0123456789abcdef")
    (root / "run/cluster-api").mkdir(parents=True)
    (root / "run/cluster-api/bootstrap-success.complete").write_text("success\n")
    (root / "etc/machine-agent").mkdir(parents=True)
    (root / "etc/machine-agent/config.yaml").write_text("apiVersion: machine-agent.io/v1alpha1\n"
                                                        "kind: AgentConfig\n")
    (root / "etc/machine-id").write_text("3d1219c7c4c5404aaa1f6d2a48adfda4\n")
    (root / "var/log/journal/3d1219c7c4c5404aaa1f6d2a48adfda4").mkdir(parents=True)
    (root / "var/log/journal/3d1219c7c4c5404aaa1f6d2a48adfda4/system.journal").write_text("x")


def test_clean_leaves_a_node_that_bootstraps_afresh(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    a_node_that_ran(tmp_path)
    assert agent(tmp_path, "clean") == 0
    out = capsys.readouterr().out
    assert "removed /var/lib/machine-agent (journal, status, credentials)" in out
    assert "removed /run/cluster-api/bootstrap-success.complete" in out
    # only the (unheld, empty) node lock stays: never a lock file another waiter locks
    assert [p.name for p in (tmp_path / "var/lib/machine-agent").iterdir()] == ["node.lock"]
    assert not (tmp_path / "run/cluster-api/bootstrap-success.complete").exists()
    # the image's own: configuration, machine id and logs unless asked
    assert (tmp_path / "etc/machine-agent/config.yaml").exists()
    assert (tmp_path / "etc/machine-id").read_text().strip()
    assert (tmp_path / "var/log/journal/3d1219c7c4c5404aaa1f6d2a48adfda4").exists()
    assert agent(tmp_path, "status") == 0
    assert "no run recorded on this boot yet" in capsys.readouterr().out
    assert agent(tmp_path, "clean") == 0  # safe to run twice
    assert capsys.readouterr().out == "nothing to clean: no agent state on this node\n"


def test_logs_and_machine_id_on_request(tmp_path: Path,
                                        capsys: pytest.CaptureFixture[str]) -> None:
    a_node_that_ran(tmp_path)
    assert agent(tmp_path, "clean", "--logs", "--machine-id") == 0
    assert (tmp_path / "etc/machine-id").read_text() == ""  # systemd makes one at boot
    # the system journal is every service's, not the agent's: it stays, and says so
    assert (tmp_path / "var/log/journal/3d1219c7c4c5404aaa1f6d2a48adfda4/system.journal"
            ).read_text() == "x"
    out = capsys.readouterr().out
    assert "kept the system journal" in out and "/var/log/journal" not in out


def test_addresses_still_held_are_not_forgotten_silently(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    a_node_that_ran(tmp_path)
    journal = Journal.load(Host(tmp_path))
    held = Held("netbox", "uuid/eth0/ipv4", "v4", "eth0",
                Allocation("192.0.2.7", 24, "192.0.2.1", "ipv4", handle="42"))
    journal.section(Ledger).held[held.claim_key] = held
    journal.save()
    assert agent(tmp_path, "clean") == 1
    err = capsys.readouterr().err
    assert "192.0.2.7 (netbox)" in err and "machine-agent release-addresses" in err
    assert (tmp_path / "var/lib/machine-agent/journal.json").exists()
    assert agent(tmp_path, "clean", "--force") == 0
    # only the (unheld, empty) node lock stays: never a lock file another waiter locks
    assert [p.name for p in (tmp_path / "var/lib/machine-agent").iterdir()] == ["node.lock"]


def test_every_command_and_option_says_what_it_does() -> None:
    parser = _parser()
    sub = next(a for a in parser._actions if a.dest == "command")
    helps = {c.dest: c.help for c in sub._choices_actions}  # type: ignore[attr-defined]
    assert {"demo", "version", "clean", "analyze", "release-addresses"} <= set(helps)
    assert all(helps.values()), helps
    assert "reset" in helps["release-addresses"]  # the old name still works
    assert all(a.help for a in parser._actions if a.dest not in ("help", "command")), \
        [a.dest for a in parser._actions if not a.help]
