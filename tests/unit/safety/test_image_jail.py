"""An image tree (`--root`) is a jail: its links resolve as on the booted node, inside
the tree, so no write, read, lock or removal reaches the build host's files."""

from __future__ import annotations

from pathlib import Path

import pytest

from agent.cli import main
from agent.host import Host
from agent.state import JOURNAL, NODE_LOCK, Journal, node_lock
from agent.tls import system_bundle


@pytest.fixture
def image(tmp_path: Path) -> Path:
    root = tmp_path / "image"
    (root / "run").mkdir(parents=True)
    (root / "var").mkdir()
    (root / "var/run").symlink_to("/run")  # as the project's own base tree has it
    return root


@pytest.fixture
def outside(tmp_path: Path) -> Path:
    """A directory of the build host's, which the image's links name."""
    place = tmp_path / "host"
    place.mkdir()
    (place / "precious").write_text("the build host's\n")
    return place


def test_an_absolute_link_in_the_image_resolves_inside_it(image: Path) -> None:
    host = Host(image, image=True)
    assert host.path("/var/run/cluster-api/bootstrap-success.complete") == \
        image / "run/cluster-api/bootstrap-success.complete"
    assert host.path("/var/run") == image / "run"
    assert host.path("/var/run", follow_last=False) == image / "var/run"


def test_a_write_through_a_link_out_of_the_image_lands_in_the_image(
        image: Path, outside: Path) -> None:
    (image / "srv").symlink_to(outside)  # absolute: the build host's directory
    (image / "etc").mkdir()
    (image / "etc/up").symlink_to("../../../../../../..")  # `..` stops at the top
    host = Host(image, image=True)
    host.write_file("/srv/precious", "the image's\n")
    host.write_file("/etc/up/written", "x")
    assert (outside / "precious").read_text() == "the build host's\n"
    assert (image / outside.relative_to("/") / "precious").read_text() == "the image's\n"
    assert (image / "written").read_text() == "x"
    assert sorted(p.name for p in outside.iterdir()) == ["precious"]


def test_a_linked_state_directory_keeps_journal_status_and_lock_in_the_image(
        image: Path, outside: Path) -> None:
    (image / "var/lib").mkdir()
    (image / "var/lib/machine-agent").symlink_to(outside)
    host = Host(image, image=True)
    with node_lock(host, "run"):
        Journal.load(host).save()
    assert sorted(p.name for p in outside.iterdir()) == ["precious"]
    inside = image / outside.relative_to("/")
    assert (inside / "journal.json").exists() and (inside / "node.lock").exists()
    assert host.exists(JOURNAL)


def test_a_node_lock_that_is_a_link_is_refused_and_its_target_kept(
        tmp_path: Path, outside: Path, capsys: pytest.CaptureFixture[str]) -> None:
    lock = tmp_path / NODE_LOCK.lstrip("/")
    lock.parent.mkdir(parents=True)
    lock.symlink_to(outside / "precious")
    assert main(["--root", str(tmp_path), "clean"]) == 1
    err = capsys.readouterr().err
    assert f"the lock file {NODE_LOCK} is a symbolic link" in err
    assert "InternalError" not in err
    assert (outside / "precious").read_text() == "the build host's\n"


def test_clean_logs_with_the_journal_linked_out_of_the_image_keeps_the_targets_files(
        image: Path, outside: Path) -> None:
    (image / "var/log").mkdir()
    (image / "var/log/journal").symlink_to(outside)
    assert main(["--root", str(image), "clean", "--logs"]) == 0
    assert sorted(p.name for p in outside.iterdir()) == ["precious"]


def test_the_images_trust_store_linked_out_of_it_is_not_the_build_hosts(
        image: Path, outside: Path) -> None:
    certs = image / "etc/ssl/certs"
    certs.mkdir(parents=True)
    (certs / "ca-certificates.crt").symlink_to(outside / "precious")  # the host's file
    assert system_bundle(image) is None  # the image has no bundle of its own
    (image / outside.relative_to("/")).mkdir(parents=True)
    (image / outside.relative_to("/") / "precious").write_text("the image's CAs\n")
    found = system_bundle(image)
    assert found is not None and Path(found).read_text() == "the image's CAs\n"
