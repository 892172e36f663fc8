"""bench/whole_boot.py's reading of a boot's report: the agent's journal lines tile its
run from exec to READY=1, each line's segment counted as the external wait it opens or
as the agent's own; cloud-init's boot is split by its stages and the files the CABPK
commands wrote. (The report of a real boot: tests/e2e/test_image_boot.py.)"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

import pytest

from agent.phases import registry
from bench import whole_boot
from bench.table import print_table

OFFSET = 1_796_000_000.0
"""The guest's realtime at the kernel's start: realtime = OFFSET + monotonic."""


def iso(mono: float) -> str:
    return datetime.fromtimestamp(OFFSET + mono, UTC).strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"


def unit(start: float = 0, exit: float = 0, active: float = 0) -> dict[str, Any]:
    return {"ExecMainStartTimestampMonotonic": int(start * 1e6),
            "ExecMainExitTimestampMonotonic": int(exit * 1e6),
            "ActiveEnterTimestampMonotonic": int(active * 1e6)}


def console(doc: dict[str, Any]) -> list[str]:
    """The serial console as whole-boot-report.service writes it, among other lines."""
    lines = ["[   99.1] systemd[1]: Starting something..."]
    lines += [f"WHOLE-BOOT {key} {json.dumps(value)}" for key, value in doc.items()]
    return [*lines, "WHOLE-BOOT end true", "[  140.0] reboot: Power down"]


CLOUD_INIT_UNITS = {"cloud-init-local.service": unit(20, 40), "cloud-init.service": unit(45, 55),
                    "cloud-config.service": unit(56, 70), "cloud-final.service": unit(80, 99)}


def agent_doc() -> dict[str, Any]:
    journal = [(100.00001, "", "Starting machine-agent.service - machine-agent...", "1"),
               (106, "network", "probing 1 IPv4 address(es) for conflicts (ARP)", "9"),
               (110, "", "create /etc/systemd/network/10-machine-agent-eth0.network", "9"),
               (111, "time", "waiting for the clock to synchronise (offset 0s, ...)", "9"),
               (115, "", "run sh -c <script: 43 bytes, sha256:429bdd0d4564>", "9"),
               (117, "join", "kubeadm join, attempt 1 of 3", "9"),
               (120, "", "kubeadm: This node has joined the cluster:", "9"),
               (121, "", "create /etc/cni/net.d/10-machine-agent.conflist", "9"),
               (129, "", "bootstrap finished: ok (all phases completed)", "9"),
               (130.01, "", "Started machine-agent.service - machine-agent...", "1")]
    spans = [("network", 105, 110.5), ("time", 110.5, 115), ("join", 115, 121),
             ("cni", 121, 129)]
    return {
        "clock": {"realtime": OFFSET + 140, "monotonic": 140},
        "units": {**CLOUD_INIT_UNITS,
                  "machine-agent.service": unit(100, active=130)},
        "files": {}, "cloudinit": [],
        "analyze": {"startedAt": iso(105), "finishedAt": iso(129), "seconds": 24.0,
                    "outcome": "Bootstrapped",
                    "spans": [{"name": n, "kind": "phase", "start": iso(a), "seconds": b - a}
                              for n, a, b in spans]},
        "journal": [[round(t * 1e6), phase, msg, pid] for t, phase, msg, pid in journal]}


def cloud_init_doc() -> dict[str, Any]:
    return {
        "clock": {"realtime": OFFSET + 120, "monotonic": 120},
        "units": {**CLOUD_INIT_UNITS, "machine-agent.service": unit()},
        "files": {"/run/node-prep.log": OFFSET + 93,
                  "/run/cluster-api/bootstrap-success.complete": OFFSET + 97},
        "cloudinit": [["modules-final", "start", OFFSET + 81, None],
                      ["modules-final/config-scripts-user", "start", OFFSET + 90, None]]}


def test_the_agents_journal_lines_split_its_run_into_waits_and_its_own_time() -> None:
    boot = whole_boot.agent_boot(whole_boot.report(console(agent_doc())))
    assert boot.total == pytest.approx(30)
    parts = {name: round(value, 6) for name, value in boot.parts.items() if value}
    assert parts == {
        whole_boot.START_UP: 5,  # exec to the run's start (analyze's startedAt)
        whole_boot.OWN: 3,  # 105-106, 110-111 (writing files), 129-130 (the end)
        "address probe (ARP, DAD)": 4, "NTP sync": 4,
        "bootstrap data commands (bootcmd, pre, post)": 2,
        "kubeadm join": 4,  # its progress line, then its output, to the next line
        "CNI proof (ADD/CHECK/DEL) and Node Ready": 8}
    assert boot.external == pytest.approx(22)
    assert list(boot.phases) == list(registry.names())
    assert boot.analyze_spans_sum == pytest.approx(boot.analyze_seconds)


def test_cloud_init_alone_ends_at_the_sentinel_its_commands_apart() -> None:
    boot = whole_boot.cloud_init_boot(whole_boot.report(console(cloud_init_doc())))
    assert (boot.first_stage, boot.bootstrapped) == (20, pytest.approx(97))
    assert boot.join == pytest.approx(4)  # pre-command's output to the sentinel
    assert boot.pre_commands == pytest.approx(3)  # runcmd's start to that output
    # its stages' run time: 20 + 10 + 14, and the final stage up to the sentinel
    assert boot.stages_run == pytest.approx(61)
    assert boot.own == pytest.approx(54)


def test_the_pairs_of_boots_make_one_table_of_medians(
        capsys: pytest.CaptureFixture[str]) -> None:
    slow = agent_doc()
    slow["units"]["machine-agent.service"]["ActiveEnterTimestampMonotonic"] = 190_000_000
    rows = whole_boot.rows([agent_doc(), slow, agent_doc()], [cloud_init_doc()] * 3)
    whole = next(r for r in rows if r.figure.startswith("whole boot"))
    assert (whole.ours.median, whole.anchor and whole.anchor.median) == (
        130, pytest.approx(97))
    assert whole.ours.values == (130, 190, 130)
    assert whole.met is False  # 1.34x cloud-init alone, against a goal of 1.0x
    print_table(rows)
    table = capsys.readouterr().out
    assert "wait: IPAM claim bound (none in this guest)" in table
    assert "wait: kubeadm join  " in table and "cloud-init alone: kubeadm join: 4 s" in table


def test_a_boot_without_a_report_or_a_bootstrap_is_an_error_not_a_figure() -> None:
    with pytest.raises(ValueError, match="no whole-boot report on the console"):
        whole_boot.report(["[  1.0] Linux version ...", "[ 90.0] reboot: Power down"])
    failed = agent_doc()
    failed["analyze"]["outcome"] = "PhaseFailed"
    with pytest.raises(ValueError, match="did not bootstrap"):
        whole_boot.agent_boot(failed)
    alone = cloud_init_doc()
    del alone["files"]["/run/cluster-api/bootstrap-success.complete"]
    with pytest.raises(ValueError, match="cloud-init did not bootstrap the node"):
        whole_boot.cloud_init_boot(alone)
