"""The golden image of each distribution the recipe builds (Debian 12 and 13, Ubuntu
24.04) boots under qemu (software emulation) and the agent bootstraps it: read from the
serial console, as an operator of a bare-metal node would.

The image is built by images/build.sh with this test's guest files (tests/e2e/guest/:
the AgentConfig, a NoCloud seed so cloud-init runs as on real nodes, an NTP server
inside the guest, CABPK bootstrap data with the world file of the workload cluster it
joins, a socket unit standing in for the container runtime's socket, the workload
cluster's API server (workload-apiserver.service: the API stand-in of the agent's wheel,
which completes the world file with its CA and signer token), the kubelet's part after
the join (kubelet-standin.service: posts the Node Ready once a CNI list is in place),
and a unit that prints
`machine-agent status --wait`, `systemctl show` and what the join left on the console,
then powers off; before it, whole-boot-report.service of bench/whole_boot_guest prints
the boot's timings from the journal, as bench/whole_boot.py reads them) and, as the
site binaries kubeadm and kubelet, the kubeadm stand-in
(machine_agent_sandbox/kubeadm_standin.py), built by this test: the recipe itself bakes in no
kubeadm, real or not. Its join registers the Node with the kubelet's credential, as the
kubelet does, and the join phase reads it back. The bootstrap data has a pre-command
that turns swap on and off, loads a kernel module and is itself a file write_files put
into /usr/local/bin: what the unit's sandbox forbids the agent, so it proves that the
agent runs the node owner's commands outside it (units/machine-agent.service).
Each distribution's debootstrap tree is cached between runs (see build.sh), so a warm
run takes 1.5-2.5 minutes per distribution; a cold one adds the debootstrap, a few
minutes. Nothing leaves the VM.
"""

from __future__ import annotations

import re
import subprocess
import time
from pathlib import Path

import pytest
from machine_agent_sandbox.testkit.guest_image import boot, build_image

from agent.phases import registry
from bench import whole_boot

BUDGET = 600
"""Seconds for the whole test, build and boot (the issue's 10 minutes)."""
BOOT_RESERVE = 150
"""Of the budget, what a build may not take: a warm boot takes about a minute."""
pytestmark = pytest.mark.allow_processes


SUITES = ("bookworm", "trixie", "noble")
"""The distributions the recipe builds an image of (images/build.sh --suite): Debian 12
and 13, Ubuntu 24.04; every test below runs on each one's boot."""
WORK: dict[str, Path] = {}
"""Each distribution's build directory."""


@pytest.fixture(scope="module", params=SUITES)
def suite(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture(scope="module")
def console(suite: str, tmp_path_factory: pytest.TempPathFactory) -> list[str]:
    """The serial console of one boot of a freshly built image of `suite`, ANSI colours
    removed."""
    WORK[suite] = tmp_path_factory.mktemp(f"image-{suite}")
    return build_and_boot(WORK[suite], [
        "--suite", suite, "--with-ssh", "--enable", "ntp-test-server.service",
        "--enable", "cri-standin.socket", "--enable", "workload-apiserver.service",
        "--enable", "kubelet-standin.service",
        "--enable", "machine-agent-boot-report.service",
        # The boot's timings, as the bench reads them (bench/whole_boot.py).
        "--overlay", str(whole_boot.GUEST), "--enable", "whole-boot-report.service"])


def build_and_boot(work: Path, extra: list[str]) -> list[str]:
    """Build an image with this test's guest files, the sandbox and the site binaries
    (plus `extra` arguments of images/build.sh), boot it once under qemu and return its
    serial console, ANSI colours removed."""
    started = time.monotonic()
    build_image(work, extra, BUDGET - BOOT_RESERVE)
    built = time.monotonic()
    IMAGE_FILES[work] = {path: _in_image(work / "image" / "rootfs.raw", path)
                         for path in ("/etc/machine-id", "/etc/ssh")}
    lines = boot(work, "console.log", BUDGET - (built - started))
    print(f"\nimage build {built - started:.0f}s, boot to power-off "
          f"{time.monotonic() - built:.0f}s")
    (work / "image" / "rootfs.raw").unlink()  # 3 GB (sparse) that no one reads again
    return lines


IMAGE_FILES: dict[Path, dict[str, str]] = {}
"""What the built image held before it booted: /etc/machine-id, the names in /etc/ssh."""


def _in_image(rootfs: Path, path: str) -> str:
    """A file's content (`cat`) or a directory's names (`ls`) in the ext4 image, read
    with debugfs (no mount)."""
    verb = "ls -l" if path == "/etc/ssh" else "cat"
    return subprocess.run(["debugfs", "-R", f"{verb} {path}", str(rootfs)],
                          capture_output=True, text=True, timeout=60, check=True).stdout


def report(console: list[str]) -> list[str]:
    """What the boot-report unit printed between its markers."""
    assert "BOOT-REPORT-BEGIN" in console, "\n".join(console[-60:])
    begin = console.index("BOOT-REPORT-BEGIN")
    end = console.index("BOOT-REPORT-END", begin)
    return [" ".join(line.split()) for line in console[begin + 1:end]]


def agent_lines(console: list[str]) -> list[tuple[float, str]]:
    """(kernel time stamp, message) of each line the agent printed on the console: the
    progress machine-agent-bootstrap.service shows (`status --wait`), one line per
    condition change, e.g. `NetworkReady True NetworkConfigured ...`."""
    out = []
    for line in console:
        m = re.search(r"\[\s*(\d+\.\d+)\] machine-agent\[\d+\]: (.*)$", line)
        if m:
            out.append((float(m.group(1)), " ".join(m.group(2).split())))
    return out


def test_the_unit_reached_ready_with_the_node_bootstrapped(console: list[str]) -> None:
    said = report(console)
    assert "NodeBootstrapped True Bootstrapped all phases completed" in said, said
    # Type=notify is active/running only after READY=1 (and the report unit is ordered
    # after it, so it ran only then); STATUS= is what the agent sent.
    assert "ActiveState=active" in said and "SubState=running" in said, said
    assert "StatusText=bootstrapped: Bootstrapped: all phases completed" in said, said
    # The console's progress is machine-agent-bootstrap.service's `status --wait` (the
    # daemon's own lines go to the journal with their fields, units/machine-agent.service).
    ready_at = next(t for t, msg in agent_lines(console)
                    if msg.startswith("NodeBootstrapped True"))
    print(f"\nboot to READY=1: {ready_at:.1f}s after the kernel started")


def test_cloud_init_ran_first_and_nothing_waited_for_the_network(
        suite: str, console: list[str]) -> None:
    def first(text: str) -> int:
        return next(i for i, line in enumerate(console) if text in line)

    # With cloud-init enabled (a NoCloud seed) the agent starts after its network stage,
    # and wait-online does not hold that stage for links only the agent configures.
    # The agent's first line, not systemd's "Starting machine-agent.service": systemd
    # prints no status while a unit writes to the console (cloud-config.service does,
    # and may still run when the agent starts).
    assert first("running 'init-local'") < first("machine-agent[")
    # the network stage's unit: cloud-init.service, from cloud-init 24.3 (Debian 13)
    # cloud-init-network.service
    network_stage = ("Finished cloud-init-network.servic" if suite == "trixie"
                     else "Finished cloud-init.servic")
    assert first(network_stage) < first("machine-agent[")
    assert not [line for line in console if "Job systemd-networkd-wait-online" in line]


def test_cloud_init_final_stage_waits_for_the_bootstrap(console: list[str]) -> None:
    # What the unit's comments say: multi-user.target is ordered after the agent (from
    # its WantedBy=), so reached only after READY=1, and cloud-final.service
    # after multi-user.target.
    target, final = [set(line.removeprefix("After=").split()) for line in report(console)
                     if line.startswith("After=")]
    assert "machine-agent.service" in target, target
    assert "multi-user.target" in final, final


def test_the_ntp_server_inside_the_guest_answers(console: list[str]) -> None:
    assert "ntp-test-server stratum 8" in report(console)


def test_the_phases_ran_in_order_each_condition_true(console: list[str]) -> None:
    done = [kind for _, msg in agent_lines(console)
            for kind in ("NetworkReady", "TimeSynchronized", "NodeJoined", "CNIReady")
            if msg.startswith(f"{kind} True ")]
    assert done == ["NetworkReady", "TimeSynchronized", "NodeJoined", "CNIReady"]
    assert len(done) == len(registry.names())
    said = report(console)
    for kind in ("NetworkReady", "TimeSynchronized", "NodeJoined", "CNIReady"):
        assert any(line.startswith(f"{kind} True ") for line in said), (kind, said)


def test_the_cni_list_was_proved_under_the_unit_and_the_node_turned_ready(
        console: list[str]) -> None:
    said = report(console)
    # The ADD/CHECK/DEL proof ran in a scratch network namespace of the agent's own
    # (RestrictNamespaces=net mnt), and its pod got an address from the node's subnet.
    (cni,) = [line for line in said if line.startswith("CNIReady True ")]
    assert re.search(r"network machine-agent in /etc/cni/net\.d/10-machine-agent\.conflist; "
                     r"proved with ADD/CHECK/DEL \(pod got 198\.51\.100\.\d+(/24)?\); "
                     r"Node node-0 is Ready", cni), cni
    assert "workload Node: node-0 Ready=True KubeletReady" in said, said


def test_pod_veths_keep_the_mac_their_cni_plugin_set(console: list[str]) -> None:
    # udev's default persistent MAC would replace it after the bridge plugin recorded it,
    # and its CHECK would fail ("Mac doesn't match") whenever udev is slower.
    assert "ID_NET_LINK_FILE=/usr/lib/systemd/network/50-cni-links.link" in report(console)


def test_the_agent_stopped_cleanly_at_power_off(console: list[str]) -> None:
    # The daemon's "stopping on SIGTERM" is in the journal now, not on the console.
    assert any("Stopped machine-agent.serv" in line for line in console)
    # (The timings report quotes the agent's journal, whatever its lines say.)
    assert not [line for line in console if "machine-agent" in line
                and not line.startswith("WHOLE-BOOT ")
                and re.search(r"Failed|timed out|Traceback", line)]
    assert any(line.endswith("reboot: Power down") for line in console[-5:])


def test_the_node_joined_with_the_bootstrap_data(console: list[str]) -> None:
    said = report(console)
    # The join phase read the Node back from the workload API with kubelet.conf.
    assert ("NodeJoined True Joined Node node-0 joined https://192.0.2.10:6443 "
            "(Kubernetes v1.31.2); Node node-0 registered") in said, said
    # kubeadm's kubeconfig for the kubelet, CABPK's sentinel, and the join as the
    # workload cluster (the stand-in's world) saw it: with the token and CA pin it knows.
    assert "/etc/kubernetes/kubelet.conf: server: https://192.0.2.10:6443" in said, said
    assert "/run/cluster-api/bootstrap-success.complete:success" in said, said
    assert "kubeadm-standin joins: node-0" in said, said


def test_the_bootstrap_data_commands_ran_outside_the_agent_sandbox(
        console: list[str]) -> None:
    said = report(console)
    # swapon/swapoff (@swap) and modprobe (CAP_SYS_MODULE) from a file written into
    # /usr/local/bin, reading a setting written into /tmp: none of it works inside the
    # unit's sandbox. The NodeJoined message names no failed command (see above).
    assert ("/run/node-prep.log:swap files on: 1, after swapoff -a: 0; ip_vs loaded: 1"
            in said), said


def test_the_bootstrap_data_in_user_data_ran_once_by_the_agent_not_again_by_cloud_init(
        console: list[str]) -> None:
    said = report(console)
    # The NoCloud user-data is CABPK's bootstrap data (the copy the agent joins from):
    # real cloud-init discarded it on this boot (machine-agent-cloud-init.service), so its
    # bootcmd and runcmd ran once, by the agent, and kubeadm joined once; the report
    # comes after cloud-init's final stage, where runcmd would have run them again.
    assert "cabpk commands: bootcmd preKubeadmCommands postKubeadmCommands" in said, said
    assert "kubeadm-standin runs: join" in said, said
    assert "cloud-init user-data: 1 discarded" in said, said
    # cloud-final ran (and came before this report): its runcmd had its chance
    (final,) = [line for line in said if line.startswith("cloud-final: ")]
    assert final == "cloud-final: Result=success ActiveState=active", final


def test_the_agents_time_splits_into_its_own_and_each_external_wait(
        console: list[str]) -> None:
    # What bench/whole_boot.py reports, read from this boot's journal: from the agent's
    # start to NodeBootstrapped (its READY=1), each external wait of this guest's
    # bootstrap with its time (no IPAM here: a static address), and the agent's own.
    split = whole_boot.agent_boot(whole_boot.report(console))
    for wait in ("address probe (ARP, DAD)", "gateway's answer", "NTP sync",
                 "bootstrap data commands (bootcmd, pre, post)",
                 "join preflight (the site's kubeadm, kubelet --version)", "kubeadm join",
                 "Node registration", "CNI proof (ADD/CHECK/DEL) and Node Ready"):
        assert split.parts[wait] > 0, (wait, split.parts)
    assert split.parts[whole_boot.START_UP] > 0 and split.parts[whole_boot.OWN] > 0, \
        split.parts
    # The parts are the whole systemd saw: from the exec to READY=1.
    assert sum(split.parts.values()) == pytest.approx(split.total, abs=1e-3), split.parts
    # `machine-agent analyze` accounts for the same run: each phase in order, its spans
    # adding up to its total (stamps to the millisecond), and that total the unit's
    # time from exec to READY=1 less the agent's start-up (READY=1 follows the final
    # status write at once; 10 s is room for a loaded machine, not a speed bound).
    assert list(split.phases) == list(registry.names()), split.phases
    assert all(seconds > 0 for seconds in split.phases.values()), split.phases
    assert split.analyze_spans_sum == pytest.approx(split.analyze_seconds,
                                                   abs=0.002 * len(split.phases))
    after_start_up = split.total - split.parts[whole_boot.START_UP]
    assert -0.05 < after_start_up - split.analyze_seconds < 10, (after_start_up, split)


def test_the_image_has_no_machine_id_and_no_host_keys_and_the_boot_made_its_own(
        suite: str, console: list[str]) -> None:
    """Every node of the image gets its own identity: the image's /etc/machine-id is
    empty and it holds no ssh host keys; the booted node has an ID and keys of its own,
    and sshd running (--with-ssh)."""
    built = IMAGE_FILES[WORK[suite]]
    assert built["/etc/machine-id"] == ""
    assert "ssh_host_" not in built["/etc/ssh"] and "sshd_config" in built["/etc/ssh"]
    lines = report(console)
    (ident,) = [line for line in lines if line.startswith("machine-id:")]
    assert re.fullmatch(r"machine-id: [0-9a-f]{32}", ident), ident
    (sshd,) = [line for line in lines if line.startswith("sshd:")]
    assert sshd.split()[1] == "active" and int(sshd.split()[-1]) >= 3, sshd


def test_cloud_init_reports_done_not_error(console: list[str]) -> None:
    (status,) = [line for line in report(console) if line.startswith("cloud-init status:")]
    assert status == "cloud-init status: done", status
