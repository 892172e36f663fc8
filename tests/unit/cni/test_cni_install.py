"""Installing plugin bundles: checksum first, hostile archives refused, atomic rename."""

from __future__ import annotations

import tarfile
from pathlib import Path

import pytest

from agent.config.cni import PluginSource
from agent.host import Host
from agent.phases.cni.install import BundleError, fetch_bundle, install_change
from tests.cni_fixtures import link, plugin_bundle, sha256, snapshot, tarball

BIN = "/opt/cni/bin"


def put_bundle(root: Path, data: bytes, name: str = "plugins.tgz") -> PluginSource:
    (root / "srv").mkdir(exist_ok=True)
    (root / "srv" / name).write_bytes(data)
    return PluginSource(source="bundle", path=f"/srv/{name}", sha256=sha256(data))


def install(host: Host, source: PluginSource) -> None:
    bundle = fetch_bundle(host.read_only_view(), source)
    assert bundle is not None
    change = install_change(host.read_only_view(), BIN, bundle)
    assert change is not None
    change.action(host)


def test_bundle_is_installed_into_a_fresh_bin_dir_as_executables(tmp_path: Path) -> None:
    source = put_bundle(tmp_path, plugin_bundle(("bridge", "host-local")))
    host = Host(tmp_path)
    install(host, source)
    bin_dir = tmp_path / "opt/cni/bin"
    assert sorted(p.name for p in bin_dir.iterdir()) == ["bridge", "host-local"]
    assert bin_dir.stat().st_mode & 0o777 == 0o755
    assert all(p.stat().st_mode & 0o777 == 0o755 for p in bin_dir.iterdir())
    assert (bin_dir / "bridge").read_bytes() == Path("/usr/lib/cni/bridge").read_bytes()
    assert sorted(p.name for p in (tmp_path / "opt/cni").iterdir()) == ["bin"]  # no staging


def test_existing_plugins_are_kept_changed_ones_replaced_and_rerun_is_a_no_op(
        tmp_path: Path) -> None:
    bin_dir = tmp_path / "opt/cni/bin"
    bin_dir.mkdir(parents=True)
    (bin_dir / "flannel").write_bytes(b"#!/bin/sh\n")
    (bin_dir / "flannel").chmod(0o755)
    (bin_dir / "bridge").write_bytes(b"old bridge")
    source = put_bundle(tmp_path, plugin_bundle(("bridge", "loopback")))
    host = Host(tmp_path)
    bundle = fetch_bundle(host, source)
    assert bundle is not None
    change = install_change(host, BIN, bundle)
    assert change is not None and change.diff == f"+ {BIN}/bridge\n+ {BIN}/loopback\n"
    change.action(host)
    assert sorted(p.name for p in bin_dir.iterdir()) == ["bridge", "flannel", "loopback"]
    assert (bin_dir / "flannel").read_bytes() == b"#!/bin/sh\n"
    assert (bin_dir / "bridge").read_bytes() == Path("/usr/lib/cni/bridge").read_bytes()
    assert install_change(host, BIN, bundle) is None


def test_checksum_mismatch_is_refused_before_anything_is_written(tmp_path: Path) -> None:
    data = plugin_bundle(("bridge",))
    source = put_bundle(tmp_path, data)
    wrong = PluginSource(source="bundle", path=source.path, sha256="0" * 64)
    before = snapshot(tmp_path)
    with pytest.raises(BundleError) as info:
        fetch_bundle(Host(tmp_path), wrong)
    assert f"has sha256 {sha256(data)}, expected {'0' * 64}" in str(info.value)
    assert "nothing was installed" in str(info.value)
    assert snapshot(tmp_path) == before


def _special(name: str, kind: bytes) -> tarfile.TarInfo:
    info = tarfile.TarInfo(name)
    info.type = kind
    return info


HOSTILE = {
    "dot-dot": ([("../evil", b"x")], "'../evil': path with '..' escapes the target"),
    "nested dot-dot": ([("./a/../../evil", b"x")], "path with '..' escapes the target"),
    "absolute": ([("/etc/cron.d/evil", b"x")], "'/etc/cron.d/evil': absolute path"),
    "symlink escape": ([link("bridge", "/etc/passwd")],
                       "'bridge': link to '/etc/passwd'; only regular files"),
    "symlink then write through it": (
        [link("d", "/tmp"), ("d/evil", b"x")], "'d': link to '/tmp'"),
    "hard link": ([link("bridge", "../../etc/shadow", hard=True)], "'bridge': link to"),
    "device": ([_special("null", tarfile.CHRTYPE)], "not a regular file"),
    "fifo": ([_special("pipe", tarfile.FIFOTYPE)], "not a regular file"),
    "subdirectory": ([("bin/bridge", b"x")], "file in a subdirectory; the bundle must be flat"),
}


@pytest.mark.parametrize("case", sorted(HOSTILE))
def test_hostile_archive_is_refused_and_the_tree_is_untouched(tmp_path: Path,
                                                              case: str) -> None:
    members, expected = HOSTILE[case]
    good = [("bridge-ok", b"\x7fELF fine")]
    source = put_bundle(tmp_path, tarball([*good, *members]))
    (tmp_path / "opt/cni/bin").mkdir(parents=True)
    before = snapshot(tmp_path)
    with pytest.raises(BundleError) as info:
        fetch_bundle(Host(tmp_path), source)
    assert expected in str(info.value)
    assert "nothing was installed" in str(info.value)
    assert snapshot(tmp_path) == before
    assert not (tmp_path.parent / "evil").exists()


def test_not_a_tarball_is_refused_with_what_to_give(tmp_path: Path) -> None:
    source = put_bundle(tmp_path, b"this is not gzip")
    with pytest.raises(BundleError, match=r"is not a readable tar\.gz"):
        fetch_bundle(Host(tmp_path), source)


def test_interrupted_staging_is_cleaned_up_on_the_next_install(tmp_path: Path) -> None:
    leftover = tmp_path / "opt/cni/.bin.staging-abc"
    leftover.mkdir(parents=True)
    (leftover / "bridge").write_bytes(b"half")
    source = put_bundle(tmp_path, plugin_bundle(("loopback",)))
    install(Host(tmp_path), source)
    assert sorted(p.name for p in (tmp_path / "opt/cni").iterdir()) == ["bin"]
