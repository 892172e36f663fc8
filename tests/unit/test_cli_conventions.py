"""Conventions a user of one command can count on in the others: the same output switch
(`--format text|json`, with `--json` as its short form) and the exit statuses listed in
`--help`."""

from __future__ import annotations

import contextlib
import io

import pytest

from agent.cli import main

DOCUMENT_COMMANDS = ("status", "analyze", "doctor")
COMMANDS_WITH_EXIT_CODES = ("run", "plan", "status", "analyze", "doctor", "release-addresses",
                            "clean")


def help_of(command: str) -> str:
    out = io.StringIO()
    with contextlib.redirect_stdout(out), pytest.raises(SystemExit) as done:
        main([command, "--help"])
    assert done.value.code == 0
    return out.getvalue()


@pytest.mark.parametrize("command", DOCUMENT_COMMANDS)
def test_every_command_that_prints_a_document_takes_format_json_and_its_short_form(
        command: str) -> None:
    text = help_of(command)
    assert "--format {text,json" in text
    assert "--json" in text and "same as --format json" in text


@pytest.mark.parametrize("command", COMMANDS_WITH_EXIT_CODES)
def test_every_command_lists_its_exit_statuses(command: str) -> None:
    text = help_of(command)
    assert "exit status" in text
    assert "  0  " in text or "  0    " in text
