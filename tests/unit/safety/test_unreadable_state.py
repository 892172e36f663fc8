"""The agent's own files read back (the journal, the status file) and any file it reads
are bounded: a FIFO is refused at once instead of hanging the agent, a device is refused
instead of filling its memory, and a cut or absurdly nested JSON file is an error naming
the file, not a traceback."""

from __future__ import annotations

from pathlib import Path

import pytest

from agent.cli import main
from agent.host import Host
from agent.hostpath import UnreadableFileError, read_regular
from agent.report import STATUS_FILE
from agent.state import JOURNAL
from tests.unit.fifo import make_fifo, raised_within

DEEP = "[" * 100_000 + "]" * 100_000


@pytest.mark.parametrize("name", [STATUS_FILE, JOURNAL])
def test_a_fifo_in_place_of_the_agents_own_file_is_refused_at_once(
        tmp_path: Path, name: str, capsys: pytest.CaptureFixture[str]) -> None:
    fifo = make_fifo(tmp_path, name)
    codes: list[int] = []
    assert raised_within(10, fifo, lambda: codes.append(
        main(["--root", str(tmp_path), "status"]))) is None
    assert codes == [1]
    assert "is a FIFO, not a regular file" in capsys.readouterr().err


@pytest.mark.parametrize(("name", "content", "says"), [
    (STATUS_FILE, '{"conditions": [{"type": "Ready", "sta', "is unreadable"),
    (STATUS_FILE, DEEP, "nested too deeply"),
    (JOURNAL, DEEP, "nested too deeply"),
])
def test_a_cut_or_deeply_nested_state_file_is_an_error_naming_it(
        tmp_path: Path, name: str, content: str, says: str,
        capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / name.lstrip("/")
    path.parent.mkdir(parents=True)
    path.write_text(content)
    assert main(["--root", str(tmp_path), "status"]) == 1
    err = capsys.readouterr().err
    assert name in err and says in err
    assert "Traceback" not in err and "InternalError" not in err


def test_a_device_is_refused_before_a_byte_is_read() -> None:
    with pytest.raises(UnreadableFileError, match="is a character device, not a regular"):
        read_regular("/dev/zero")
    with pytest.raises(UnreadableFileError, match="is a character device"):
        Host("/", read_only=True).read_bytes("/dev/zero")


def test_a_file_over_its_bound_is_refused_while_it_is_read(tmp_path: Path) -> None:
    (tmp_path / "big").write_bytes(b"x" * 5000)
    with pytest.raises(UnreadableFileError, match="is larger than 4096 bytes"):
        Host(tmp_path).read_bytes("/big", limit=4096)
    assert Host(tmp_path).read_bytes("/big", limit=5000) == b"x" * 5000
