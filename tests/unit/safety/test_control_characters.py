"""No raw control character from a value reaches the terminal or a log line: a command's
output with ESC sequences, a unit name with a newline and ESC in bootstrap data, an
interface key with a newline; each is printed escaped (`\\x1b`, `\\n`)."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import pytest
from machine_agent_sandbox.testkit.bootstrap import Flavour
from machine_agent_sandbox.testkit.bootstrap import cabpk_ignition as ignition

from agent.config.fields import join_path
from agent.errors import FieldError
from agent.logs import setup_logging
from agent.phases.join.cloudconfig import BootstrapDataError
from agent.phases.join.datakeys import check_other_keys
from agent.phases.join.ignition import parse_ignition
from tests.unit.console.test_status import bootstrap, network, status, time_phase
from tests.unit.network.netconfig import network_errors

ESC = "\x1b"
OUTPUT = f"kubeadm: {ESC}[2J{ESC}[31mcleared your screen{ESC}[0m\rOVERWRITTEN"


def test_a_command_output_with_escape_sequences_is_printed_escaped_by_status(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bootstrap(tmp_path, [network(), time_phase(fail=OUTPUT)])
    capsys.readouterr()
    status(tmp_path)
    out = capsys.readouterr().out
    assert ESC not in out and "\r" not in out
    assert "\\x1b[2J\\x1b[31mcleared your screen\\x1b[0m\\rOVERWRITTEN" in out


def test_a_log_line_cannot_be_forged_or_colour_the_terminal(
        capsys: pytest.CaptureFixture[str]) -> None:
    setup_logging("text", "info")
    logging.getLogger("agent.test").warning("output: %s", f"ok\n00:00:00 INFO    {OUTPUT}")
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and ESC not in err
    assert "ok\\n00:00:00 INFO" in err


def test_a_unit_name_with_a_newline_and_escape_is_refused_escaped() -> None:
    doc = json.loads(ignition(Flavour("join", "apiVersion: kubeadm.k8s.io/v1beta4\n"
                                              "kind: JoinConfiguration\n")))
    doc["systemd"]["units"].append({"name": f"x\n{ESC}[31mFAKE.service", "enabled": True})
    parsed = parse_ignition(json.dumps(doc))
    with pytest.raises(BootstrapDataError) as err:
        check_other_keys(parsed.other, None, "ignition")  # type: ignore[arg-type]
    assert ESC not in str(err.value) and "\n" not in str(err.value)
    assert "systemd.units.x\\n\\x1b[31mFAKE.service" in str(err.value)


def test_an_interface_key_with_a_newline_is_echoed_escaped_in_the_errors_path() -> None:
    errors = network_errors({"networkConfig": {"version": 2, "ethernets": {
        f"eth0\n{ESC}[31mspec.fake: ok": {"dhcp4": "maybe"}}}})
    assert errors and all("\n" not in e and ESC not in e for e in errors), errors
    assert str(FieldError(join_path("a", "b\nc"), "bad")) == "a.b\\nc: bad"
