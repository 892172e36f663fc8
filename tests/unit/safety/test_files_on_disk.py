"""Files the agent leaves on disk (issue 26 #5, #7, #9, #10): a symlink given to
remove_tree goes without its target's contents; a gz+b64 bootstrap file is unpacked with a
bound; the state directory is 0700 even when credentials come as data and status.json is
not world-readable; temp files a killed write left behind are removed on the next start."""

from __future__ import annotations

import base64
import gzip
import os
from pathlib import Path

import pytest

from agent.config.management import ManagementSpec
from agent.host import Host
from agent.kube.credentials import store_credentials
from agent.phases.join.cloudconfig import BootstrapDataError, parse_cloud_config
from agent.report import STATUS_FILE, Condition, LocalStatus
from agent.state import STATE_DIR


def test_remove_tree_given_a_symlink_removes_the_link_not_what_it_points_at(
        tmp_path: Path) -> None:
    precious = tmp_path / "precious"
    precious.mkdir()
    (precious / "keep").write_text("mine")
    (precious / "sub").mkdir()
    (precious / "sub" / "keep").write_text("mine too")
    root = tmp_path / "root"
    (root / "opt/cni").mkdir(parents=True)
    link = root / "opt/cni/.bin.staging-x1"
    link.symlink_to(precious)
    assert Host(root).remove_tree("/opt/cni/.bin.staging-x1")
    assert not os.path.lexists(link)
    assert (precious / "keep").read_text() == "mine"
    assert (precious / "sub" / "keep").read_text() == "mine too"


def _cloud_config(content: str, encoding: str) -> str:
    return ("#cloud-config\nwrite_files:\n- path: /etc/kubernetes/x.conf\n"
            f"  encoding: {encoding}\n  content: {content}\n")


def test_a_gzip_bomb_in_the_bootstrap_data_is_refused_before_it_is_unpacked() -> None:
    bomb = base64.b64encode(gzip.compress(b"\0" * (64 << 20), 9)).decode()
    assert len(bomb) < 100_000
    with pytest.raises(BootstrapDataError) as err:
        parse_cloud_config(_cloud_config(bomb, "gz+b64"), node_name="n")
    assert "write_files[0]: content unpacks to more than 16777216 bytes" in str(err.value)


def test_a_small_gz_b64_file_is_unpacked_as_before() -> None:
    data = base64.b64encode(gzip.compress(b"apiVersion: v1\n")).decode()
    (wf,) = parse_cloud_config(_cloud_config(data, "gz+b64"), node_name="n").files
    assert wf.content == b"apiVersion: v1\n"


def test_a_truncated_gzip_file_is_refused() -> None:
    data = base64.b64encode(gzip.compress(b"apiVersion: v1\n" * 100)[:-12]).decode()
    with pytest.raises(BootstrapDataError, match="does not decode as gz"):
        parse_cloud_config(_cloud_config(data, "gz+b64"), node_name="n")


def test_the_state_directory_is_0700_when_credentials_come_as_data(tmp_path: Path) -> None:
    host = Host(tmp_path)
    spec = ManagementSpec(server="https://192.0.2.100:6443", token_data="s3cr3t-token",
                          ca_data="-----BEGIN CERTIFICATE-----\nx\n-----END CERTIFICATE-----")
    stored = store_credentials(spec, host)
    assert stored.token_file == f"{STATE_DIR}/credentials/token"
    state = tmp_path / STATE_DIR.lstrip("/")
    assert state.stat().st_mode & 0o777 == 0o700
    assert (state / "credentials").stat().st_mode & 0o777 == 0o700
    assert (state / "credentials/token").stat().st_mode & 0o777 == 0o600
    LocalStatus(host).publish([Condition("NodeBootstrapped", "True", "Bootstrapped", "ok",
                                         "2026-12-03T16:00:00Z")],
                              final=True)
    assert (tmp_path / STATUS_FILE.lstrip("/")).stat().st_mode & 0o777 == 0o600


def test_a_state_directory_left_0755_is_tightened_by_the_next_run(tmp_path: Path) -> None:
    from agent.state import node_lock  # (imported here: each test fails alone on main)

    state = tmp_path / STATE_DIR.lstrip("/")
    state.mkdir(parents=True, mode=0o755)
    state.chmod(0o755)
    with node_lock(Host(tmp_path), "run"):
        assert state.stat().st_mode & 0o777 == 0o700


def test_temp_files_a_killed_write_left_are_removed_on_the_next_start(tmp_path: Path) -> None:
    from agent.state import node_lock

    host = Host(tmp_path)
    host.write_file("/etc/systemd/network/10-machine-agent-eth0.network", "[Match]\n")
    network = tmp_path / "etc/systemd/network"
    stale = [network / ".10-machine-agent-eth0.network.k3j4_h5g.tmp",
             tmp_path / "var/lib/machine-agent/.journal.json.abcd1234.tmp",
             tmp_path / "etc/.hosts.zz99yy88.tmp",
             # the workload credentials, one directory per kubeconfig (agent.kube.workload)
             tmp_path / "run/machine-agent/workload/kubelet.conf/.ca.crt.5c1m0f4h.tmp"]
    for path in stale:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("half")
    kept = [network / ".admin-notes.tmp", network / "other.network",
            tmp_path / "var/lib/unrelated/.x.abcd1234.tmp"]
    for path in kept:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("not ours")
    elsewhere = tmp_path / "elsewhere"
    elsewhere.write_text("a link's target stays")
    link = network / ".y.network.qwer1234.tmp"
    link.symlink_to(elsewhere)
    with node_lock(host, "run"):
        pass
    assert [p for p in stale if p.exists()] == []
    assert all(p.read_text() == "not ours" for p in kept)
    assert link.is_symlink() and elsewhere.read_text() == "a link's target stays"
    assert (network / "10-machine-agent-eth0.network").read_text() == "[Match]\n"
