"""The generated user docs match the code: regenerate them when a setting or a reason
changes (the commands are in each file's first lines)."""

from __future__ import annotations

from pathlib import Path

from agent.errors import Reason
from agent.reference import configuration, troubleshooting

DOCS = Path(__file__).parents[2] / "docs"


def test_configuration_reference_is_generated_from_the_model() -> None:
    assert (DOCS / "configuration.md").read_text() == configuration(), \
        "docs/configuration.md is stale: python -m agent.reference > " \
        "docs/configuration.md"


def test_troubleshooting_lists_every_reason_and_is_generated() -> None:
    text = (DOCS / "troubleshooting.md").read_text()
    assert text == troubleshooting(), "docs/troubleshooting.md is stale: python -m " \
        "agent.reference --reasons > docs/troubleshooting.md"
    for reason in Reason:
        assert f"`{reason.value}` |" in text


def test_reference_documents_every_setting_with_its_key_and_default() -> None:
    text = configuration()
    assert "| `arpProbes` | integer | `3` |" in text
    assert "| `syncTimeout` | duration (`250ms`, `30s`, `5m`) | `5m` |" in text
    assert "| `token` | string | (secret) |" in text
    assert "| `name` | string | **required** |" in text
