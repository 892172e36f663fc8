"""Logs as journald receives them when the agent runs as a service: the native protocol
with a priority and the fields an operator selects by (`journalctl -p err`,
`PHASE=time`, `REASON=...`, `MACHINE=ns/name`), tested against a socket in a temporary
directory that parses the protocol as journald does."""

from __future__ import annotations

import io
import logging
import os
import re
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from agent.config import load_config
from agent.errors import PermanentError, Reason, TemporaryError
from agent.host import Host
from agent.logs import REDACT, connected_to_journal, set_context, setup_logging
from agent.orchestrator import Orchestrator
from agent.phases.base import Phase, PhaseContext, PhasePlan

from .fake_journal import FakeJournal


@pytest.fixture
def journal(tmp_path: Path) -> Iterator[FakeJournal]:
    fake = FakeJournal(tmp_path)
    setup_logging("journal", "info", journal_socket=fake.path)
    try:
        yield fake
    finally:
        setup_logging("text")
        sys.excepthook = sys.__excepthook__
        set_context(machine=None)
        fake.close()


class Flaky(Phase):
    name, condition, success = "time", "TimeSynchronized", Reason.TimeSynchronized

    def __init__(self) -> None:
        self.tries = 0

    def plan(self, ctx: PhaseContext) -> PhasePlan:
        self.tries += 1
        if self.tries == 1:
            raise TemporaryError("chronyd is not answering yet", reason=Reason.CommandTimeout)
        raise PermanentError("servers 192.0.2.123 did not answer:\nno reply in 30s",
                             reason=Reason.TimeNotSynchronized)


def run_failing(root: Path) -> None:
    host = Host(root)
    host.clock.sleep = lambda seconds: None  # type: ignore[method-assign]
    Orchestrator(load_config(host, []), host, phases=[Flaky()]).run()


def entries(journal: FakeJournal) -> list[dict[str, str]]:
    found = []
    while not journal.empty():
        found.append(journal.entry())
    return found


def test_a_failure_has_priority_err_and_names_phase_reason_machine_and_attempt(
        journal: FakeJournal, tmp_path: Path) -> None:
    set_context(machine="site-a/worker-0")
    run_failing(tmp_path / "root")
    seen = entries(journal)
    retry = next(e for e in seen if e["PRIORITY"] == "4")
    assert retry["MESSAGE"].startswith("attempt 1 failed (chronyd is not answering yet")
    assert (retry["PHASE"], retry["REASON"], retry["ATTEMPT"]) == (
        "time", "CommandTimeout", "1")
    (error,) = [e for e in seen if e["PRIORITY"] == "3"]  # what `journalctl -p err` shows
    assert error["SYSLOG_IDENTIFIER"] == "machine-agent"
    assert (error["PHASE"], error["REASON"], error["MACHINE"]) == (
        "time", "TimeNotSynchronized", "site-a/worker-0")
    # a message of several lines arrives whole (the protocol's length-prefixed form)
    assert "servers 192.0.2.123 did not answer:\nno reply in 30s" in error["MESSAGE"]
    assert error["CODE_FILE"].endswith("agent/orchestrator.py")
    assert all(e["PRIORITY"] == "6" for e in seen if e not in (retry, error))


class Chatty(Phase):
    """A phase whose own module logs, as the real phases' modules do."""

    name, condition, success = "time", "TimeSynchronized", Reason.TimeSynchronized

    def plan(self, ctx: PhaseContext) -> PhasePlan:
        logging.getLogger("agent.phases.time.chrony").info("waiting for chronyd")
        return PhasePlan(self.name)


def test_a_phases_own_lines_carry_its_phase_field_and_later_lines_do_not(
        journal: FakeJournal, tmp_path: Path) -> None:
    host = Host(tmp_path / "root")
    Orchestrator(load_config(host, []), host, phases=[Chatty()]).plan()
    logging.getLogger("agent.phases.time.chrony").info("waiting for chronyd")  # no plan
    Orchestrator(load_config(host, []), host, phases=[Chatty()]).run()
    logging.getLogger("agent.session").info("after the run")
    seen = entries(journal)
    own = [e for e in seen if e["MESSAGE"] == "waiting for chronyd"]
    assert [e.get("PHASE") for e in own] == [None, None, "time"]  # only the run sets it
    (after,) = [e for e in seen if e["MESSAGE"] == "after the run"]
    assert "PHASE" not in after


def test_secrets_are_redacted_in_every_field(journal: FakeJournal) -> None:
    REDACT.add("s3cr3t-t0ken-value")
    logging.getLogger("agent.test").error("token s3cr3t-t0ken-value refused",
                                          extra={"reason": "s3cr3t-t0ken-value"})
    (entry,) = entries(journal)
    assert "s3cr3t" not in repr(entry)
    assert entry["MESSAGE"] == "token *** refused"


def test_an_entry_too_big_for_a_datagram_goes_as_a_memfd(journal: FakeJournal) -> None:
    big = "x" * 400_000
    logging.getLogger("agent.test").warning("output:\n%s", big)
    (entry,) = entries(journal)
    assert entry["MESSAGE"] == "output:\n" + big and entry["PRIORITY"] == "4"


def test_without_journald_lines_go_to_standard_error(tmp_path: Path) -> None:
    stream = io.StringIO()
    setup_logging("journal", stream=stream, journal_socket=str(tmp_path / "nobody"))
    try:
        logging.getLogger("agent.test").error("still seen", extra={"phase": "join"})
    finally:
        setup_logging("text")
    assert "ERROR   join: still seen" in stream.getvalue()


def test_auto_picks_the_journal_only_when_standard_error_is_the_journal_stream(
        tmp_path: Path) -> None:
    path = tmp_path / "stream"
    with open(path, "w") as stream, open(tmp_path / "other", "w") as other:
        st = os.fstat(stream.fileno())
        env = {"JOURNAL_STREAM": f"{st.st_dev}:{st.st_ino}"}
        assert connected_to_journal(stream, env)
        assert not connected_to_journal(other, env)  # redirected: `... > file`
        assert not connected_to_journal(stream, {})  # a terminal, or not under systemd
        assert not connected_to_journal(stream, {"JOURNAL_STREAM": "garbage"})


def test_auto_sends_to_the_journal_under_systemd(journal: FakeJournal, tmp_path: Path) -> None:
    with open(tmp_path / "stream", "w") as stream:
        st = os.fstat(stream.fileno())
        setup_logging("auto", stream=stream, journal_socket=journal.path,
                      env={"JOURNAL_STREAM": f"{st.st_dev}:{st.st_ino}"})
        logging.getLogger("agent.test").info("to the journal")
        assert entries(journal)[0]["MESSAGE"] == "to the journal"
        setup_logging("auto", stream=stream, journal_socket=journal.path, env={})
        logging.getLogger("agent.test").info("to the stream")
        assert journal.empty()
    assert "INFO    test: to the stream" in (tmp_path / "stream").read_text()


def test_with_the_console_as_standard_error_it_gets_a_copy_as_journald_would_print_it(
        journal: FakeJournal, tmp_path: Path) -> None:
    """The unit: StandardOutput=journal, StandardError=tty on /dev/console."""
    with open(tmp_path / "journal-stream", "w") as stdout, \
            open(tmp_path / "console", "w") as console:
        st = os.fstat(stdout.fileno())
        setup_logging("auto", stream=console, stdout=stdout, journal_socket=journal.path,
                      env={"JOURNAL_STREAM": f"{st.st_dev}:{st.st_ino}"})
        logging.getLogger("agent.phases.network").error("gateway down",
                                                        extra={"phase": "network"})
    (entry,) = entries(journal)
    assert (entry["MESSAGE"], entry["PRIORITY"], entry["PHASE"]) == (
        "gateway down", "3", "network")
    line = (tmp_path / "console").read_text()
    # the shape the image boot test reads from the serial console
    assert re.fullmatch(r"\[\s*\d+\.\d{6}\] machine-agent\[\d+\]: \S+ ERROR\s+network: "
                        r"gateway down\n", line), line


def test_a_crash_reaches_the_journal_with_its_traceback(journal: FakeJournal) -> None:
    try:
        raise RuntimeError("a bug")
    except RuntimeError as err:
        sys.excepthook(type(err), err, err.__traceback__)
    (entry,) = entries(journal)
    assert entry["PRIORITY"] == "2"
    assert entry["MESSAGE"].startswith("crashed: RuntimeError: a bug\nTraceback")
