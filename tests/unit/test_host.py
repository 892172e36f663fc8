"""The Host port: files under the root, commands as argument lists, secrets redacted."""

from __future__ import annotations

import json
import logging
import os
import sys
from pathlib import Path

import pytest

from agent.errors import CommandError, CommandTimeoutError, PermanentError
from agent.host import OUTSIDE_SANDBOX_ENV, Host, ReadOnlyHostError
from agent.logs import REDACT, setup_logging
from tests import fake_systemd_run
from tests.fake_systemd_run import calls


def test_files_land_under_the_root_atomically_with_their_mode(tmp_path: Path) -> None:
    host = Host(tmp_path)
    host.write_file("/etc/machine-agent/token", "s3cr3t-value\n", mode=0o600)
    target = tmp_path / "etc/machine-agent/token"
    assert target.read_text() == "s3cr3t-value\n"
    assert target.stat().st_mode & 0o777 == 0o600
    assert list(target.parent.iterdir()) == [target]  # no temp file left behind
    assert host.read_text("/etc/machine-agent/token") == "s3cr3t-value\n"
    assert host.read_text("/etc/nothing", default="") == ""
    assert host.remove("/etc/machine-agent/token") and not host.remove("/etc/machine-agent/token")
    assert host.effects.count == 2


@pytest.mark.parametrize("bad", ["etc/hosts", "/etc/../../escape", "/etc/a\nb"])
def test_paths_that_could_escape_the_root_are_refused(tmp_path: Path, bad: str) -> None:
    with pytest.raises(PermanentError):
        Host(tmp_path).write_file(bad, "x")


def test_a_read_only_host_refuses_every_change(tmp_path: Path) -> None:
    view = Host(tmp_path).read_only_view()
    with pytest.raises(ReadOnlyHostError):
        view.write_file("/etc/x", "y")
    with pytest.raises(ReadOnlyHostError):
        view.run([sys.executable, "-c", "pass"])
    assert view.run([sys.executable, "-c", "print('read')"], mutates=False).stdout == "read\n"
    assert not (tmp_path / "etc").exists()


def test_commands_capture_output_and_fail_clearly(tmp_path: Path) -> None:
    host = Host(tmp_path)
    ok = host.run([sys.executable, "-c", "import sys; print('out'); print('err', file=sys.stderr)"])
    assert (ok.returncode, ok.stdout, ok.stderr) == (0, "out\n", "err\n")
    with pytest.raises(CommandError) as info:
        host.run([sys.executable, "-c", "import sys; print('boom'); sys.exit(3)"])
    assert "exited 3: boom" in str(info.value)
    with pytest.raises(CommandTimeoutError):
        host.run([sys.executable, "-c", "import time; time.sleep(5)"], timeout=0.2)
    with pytest.raises(CommandError, match="command not found: no-such-tool"):
        host.run(["no-such-tool"])


def test_a_shell_string_is_not_a_command(tmp_path: Path) -> None:
    with pytest.raises(CommandError):  # one argument naming no program: never a shell
        Host(tmp_path).run(["echo hi; touch /tmp/pwned"])


def test_secrets_never_reach_the_log(capsys: pytest.CaptureFixture[str]) -> None:
    REDACT.add("registered-secret-value")
    setup_logging("json", "info")
    log = logging.getLogger("agent.test")
    log.info("token=abcdef.0123456789abcdef and Bearer eyJhbGciOi.payload.sig")
    log.info("value registered-secret-value and nbt_AbC123.xyz789 and password: hunter22")
    log.info("-----BEGIN RSA PRIVATE KEY-----\nMIIE\n-----END RSA PRIVATE KEY-----")
    log.info("controlPlane: {certificateKey: 'c0ffee11', ...} --certificate-key=deadbeef22")
    lines = [json.loads(line) for line in capsys.readouterr().err.splitlines()]
    text = " ".join(line["msg"] for line in lines)
    for secret in ("0123456789abcdef", "eyJhbGciOi", "registered-secret-value", "AbC123",
                   "hunter22", "MIIE", "c0ffee11", "deadbeef22"):
        assert secret not in text
    assert lines[0]["level"] == "info" and lines[0]["logger"] == "agent.test"


def test_command_errors_are_redacted(tmp_path: Path) -> None:
    with pytest.raises(CommandError) as info:
        Host(tmp_path).run([sys.executable, "-c", "import sys; sys.exit(1)",
                            "--token", "abcdef.0123456789abcdef"])
    assert "0123456789abcdef" not in str(info.value)


def test_a_streamed_command_hands_out_lines_and_keeps_them_past_its_time_out(
        tmp_path: Path) -> None:
    host = Host(tmp_path)
    lines: list[str] = []
    done = host.stream(["sh", "-c", "echo one; echo two >&2; printf 'token: s3cr3tvalue'"],
                       lines.append)
    assert (done.returncode, done.timed_out, lines) == (0, False, ["one", "two", "token: ***"])
    assert done.stdout == "one\ntwo\ntoken: s3cr3tvalue"  # raw: the caller redacts it
    lines.clear()
    # killed at its time-out (a child still holding its output open), the output kept
    hung = host.stream(["sh", "-c", "echo started; sleep 30 & wait"], lines.append,
                       timeout=0.5)
    assert (hung.timed_out, hung.stdout, lines) == (True, "started\n", ["started"])
    assert hung.duration < 10


@pytest.fixture
def systemd_run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A recording systemd-run first on PATH, and the unit's request to use it; returns
    the file each call's argument list is appended to."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    log = fake_systemd_run.install(bin_dir)
    tool = bin_dir / "site-tool"
    tool.write_text("#!/bin/sh\necho \"$SITE_SETTING $*\"; cat; echo oops >&2; exit 3\n")
    tool.chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}:{os.environ['PATH']}")
    monkeypatch.setenv(OUTSIDE_SANDBOX_ENV, "systemd-run")
    return log


def test_unsandboxed_commands_run_as_transient_services_under_the_unit(
        tmp_path: Path, systemd_run: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # A transient service starts from systemd's environment: PATH and a site's proxy
    # are passed on, the rest of the agent's environment is not.
    monkeypatch.setenv("https_proxy", "http://proxy.example:3128")
    monkeypatch.setenv("AGENT_ONLY", "not passed")
    host = Host(tmp_path, env={"SITE_SETTING": "from-host"})
    result = host.run(["site-tool", "a b"], input="piped\n", timeout=29.5, check=False,
                      sandboxed=False)
    # Output, input and exit status as if it had run as a child.
    assert (result.returncode, result.stdout, result.stderr) == (
        3, "from-host a b\npiped\n", "oops\n")
    assert result.argv == ("site-tool", "a b")
    # Variables go by name (systemd-run passes on its own values): a proxy's password
    # never stands on a command line, which every local user can read.
    assert calls(systemd_run) == [[
        "--wait", "--pipe", "--collect", "--quiet", "--property=RuntimeMaxSec=30",
        "--setenv=PATH", "--setenv=SITE_SETTING", "--setenv=https_proxy", "--",
        str(tmp_path / "bin/site-tool"), "a b"]]
    seen = dict(line.split("=", 1) for line in host.run(
        ["env"], sandboxed=False).stdout.splitlines())
    assert (seen["https_proxy"], seen["SITE_SETTING"]) == (
        "http://proxy.example:3128", "from-host")
    assert "AGENT_ONLY" not in seen
    # The agent's own commands stay in its sandbox.
    assert host.run(["site-tool"], check=False).stdout == "from-host \n"
    assert len(calls(systemd_run)) == 2
    # A missing program fails as it does for a child, not as systemd's exit 203.
    with pytest.raises(CommandError, match="command not found: no-such-tool"):
        host.run(["no-such-tool"], sandboxed=False)
    assert len(calls(systemd_run)) == 2


def test_unsandboxed_commands_are_children_outside_the_unit(
        tmp_path: Path, systemd_run: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(OUTSIDE_SANDBOX_ENV)
    result = Host(tmp_path).run(["site-tool"], check=False, sandboxed=False)
    assert result.returncode == 3
    assert calls(systemd_run) == []
