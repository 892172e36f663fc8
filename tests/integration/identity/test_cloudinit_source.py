"""cloud-init as a configuration source, on instance data that Debian's cloud-init itself
wrote for a NoCloud seed (nocloud.py): what users put in user-data or meta-data reaches
the AgentConfig with its origin; what is missing, unreadable or malformed is an error
naming the source and the file; an unfinished cloud-init is waited for, boundedly."""

from __future__ import annotations

import gzip
import json
import logging
from pathlib import Path

import pytest

from agent.config import default_sources, load_config
from agent.config.sources.cloudinit import CloudInitSource
from agent.errors import ConfigError, Reason, TemporaryError
from agent.host import Clock, Host
from tests.integration.identity.nocloud import (
    agent_user_data,
    nocloud_root,
    render_nocloud,
    seed_nocloud,
)

META = "instance-id: iid-node-7\nlocal-hostname: node-7\n"
AGENT = """apiVersion: machine-agent.io/v1alpha1
kind: AgentConfig
spec:
  identity:
    machine: {namespace: fleet, name: worker-7}
  time:
    maxOffset: 50ms
"""


def load(root: Path):  # type: ignore[no-untyped-def]
    return load_config(Host(root), default_sources())


def test_user_data_part_sets_values_with_its_part_as_origin(tmp_path: Path) -> None:
    nocloud_root(tmp_path, META, agent_user_data(AGENT))
    loaded = load(tmp_path)
    machine = loaded.config.spec.identity.machine
    assert machine is not None and (machine.namespace, machine.name) == ("fleet", "worker-7")
    assert loaded.origin_of("spec.identity.machine.name") == \
        "cloud-init user-data (part machine-agent.yaml)"
    assert loaded.origin_of("spec.time.maxOffset") == \
        "cloud-init user-data (part machine-agent.yaml)"


def test_user_data_made_by_cloud_inits_make_mime_is_read(tmp_path: Path) -> None:
    (tmp_path / "agent.yaml").write_text(AGENT)
    made = Host(tmp_path).run(["cloud-init", "devel", "make-mime", "--force",
                               "-a", f"{tmp_path / 'agent.yaml'}:x-machine-agent+yaml"])
    nocloud_root(tmp_path / "root", META, made.stdout)
    loaded = load(tmp_path / "root")
    assert loaded.origin_of("spec.identity.machine.name") == \
        "cloud-init user-data (part agent.yaml)"


def test_gzip_compressed_user_data_is_unpacked(tmp_path: Path) -> None:
    nocloud_root(tmp_path, META, gzip.compress(agent_user_data(AGENT)))
    assert load(tmp_path).config.spec.identity.machine is not None


def test_meta_data_key_is_a_source_below_user_data(tmp_path: Path) -> None:
    meta = META + ("machine-agent:\n  apiVersion: machine-agent.io/v1alpha1\n"
                   "  kind: AgentConfig\n  spec:\n    identity:\n      nodeName: from-meta\n"
                   "    time: {maxOffset: 1s}\n")
    nocloud_root(tmp_path, meta, agent_user_data(AGENT))
    loaded = load(tmp_path)
    assert loaded.config.spec.identity.node_name == "from-meta"
    assert loaded.origin_of("spec.identity.nodeName") == "cloud-init meta-data key machine-agent"
    assert float(loaded.config.spec.time.max_offset) == 0.05
    assert loaded.origin_of("spec.time.maxOffset") == \
        "cloud-init user-data (part machine-agent.yaml)"


def test_plain_cloud_config_user_data_gives_nothing(tmp_path: Path) -> None:
    nocloud_root(tmp_path, META, "#cloud-config\nhostname: node-7\n")
    loaded = load(tmp_path)
    assert loaded.config.spec.identity.machine is None
    assert loaded.origin_of("spec.time.maxOffset") == "default"


def test_no_cloud_init_on_this_boot_gives_nothing(tmp_path: Path) -> None:
    assert list(CloudInitSource().fragments(Host(tmp_path), [])) == []
    (tmp_path / "run/cloud-init").mkdir(parents=True)
    (tmp_path / "run/cloud-init/disabled").write_text("")
    assert list(CloudInitSource(wait=0).fragments(Host(tmp_path), [])) == []


def test_a_malformed_part_is_an_error_naming_the_part(tmp_path: Path) -> None:
    nocloud_root(tmp_path, META, agent_user_data("apiVersion: [oops\n", filename="bad.yaml"))
    with pytest.raises(ConfigError) as err:
        load(tmp_path)
    assert "cloud-init user-data (part bad.yaml): (document): not valid YAML at line" \
        in str(err.value)


def test_a_wrong_field_in_a_part_names_the_part_and_path(tmp_path: Path) -> None:
    nocloud_root(tmp_path, META, agent_user_data(AGENT.replace("maxOffset", "maxOfset")))
    with pytest.raises(ConfigError) as err:
        load(tmp_path)
    assert "cloud-init user-data (part machine-agent.yaml): spec.time.maxOfset: unknown " \
           "field (did you mean 'maxOffset'?)" in str(err.value)


def test_malformed_instance_data_is_an_error_naming_the_file(tmp_path: Path) -> None:
    nocloud_root(tmp_path, META, agent_user_data(AGENT))
    (tmp_path / "run/cloud-init/instance-data-sensitive.json").write_text("{not json")
    with pytest.raises(ConfigError) as err:
        load(tmp_path)
    assert "cloud-init (/run/cloud-init/instance-data-sensitive.json): (file): is not " \
           "valid JSON" in str(err.value)


def test_unreadable_instance_data_is_an_error_naming_the_file(tmp_path: Path) -> None:
    nocloud_root(tmp_path, META, agent_user_data(AGENT))
    sensitive = tmp_path / "run/cloud-init/instance-data-sensitive.json"
    sensitive.unlink()
    sensitive.mkdir()  # root reads any file; a directory in its place cannot be read
    with pytest.raises(ConfigError) as err:
        load(tmp_path)
    assert "cloud-init (/run/cloud-init/instance-data-sensitive.json): (file): cannot " \
           "read" in str(err.value)


def test_missing_user_data_is_an_error_naming_the_file(tmp_path: Path) -> None:
    nocloud_root(tmp_path, META, agent_user_data(AGENT))
    (tmp_path / "var/lib/cloud/instances/iid-node-7/user-data.txt").unlink()
    with pytest.raises(ConfigError) as err:
        load(tmp_path)
    assert "cloud-init user-data (/var/lib/cloud/instances/iid-node-7/user-data.txt): " \
           "(file): does not exist, though /run/cloud-init/instance-data-sensitive.json " \
           "names instance 'iid-node-7'" in str(err.value)


def test_only_the_redacted_file_still_gives_user_data(tmp_path: Path) -> None:
    nocloud_root(tmp_path, META, agent_user_data(AGENT))
    (tmp_path / "run/cloud-init/instance-data-sensitive.json").unlink()
    assert load(tmp_path).config.spec.identity.machine is not None


class StepClock(Clock):
    """Monotonic time that moves only when slept; runs `at` when it passes `when`."""

    def __init__(self) -> None:
        self.now_s = 0.0
        self.actions: list[tuple[float, object]] = []

    def monotonic(self) -> float:
        return self.now_s

    def sleep(self, seconds: float) -> None:
        self.now_s += seconds
        for when, action in list(self.actions):
            if self.now_s >= when:
                self.actions.remove((when, action))
                action()  # type: ignore[operator]


def test_unfinished_cloud_init_times_out_with_a_clear_temporary_error(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    seed_nocloud(tmp_path, META, agent_user_data(AGENT))
    render_nocloud(tmp_path, stages=1)  # init-local done; the init stage never comes
    clock = StepClock()
    caplog.set_level(logging.INFO)
    with pytest.raises(TemporaryError) as err:
        list(CloudInitSource(wait=30).fragments(Host(tmp_path, clock=clock), []))
    assert err.value.reason == Reason.CloudInitNotFinished
    assert "cloud-init has not finished its init stage after 30s" in str(err.value)
    assert clock.now_s == 30
    progress = [r.getMessage() for r in caplog.records if "waiting for cloud-init" in
                r.getMessage()]
    assert len(progress) == 3  # every 10s: at 0, 10 and 20 seconds
    assert "at most 30s" in progress[0]


def test_cloud_init_finishing_while_waiting_is_read(tmp_path: Path) -> None:
    seed_nocloud(tmp_path, META, agent_user_data(AGENT))
    render_nocloud(tmp_path, stages=1)
    clock = StepClock()
    # cloud-init's init stage finishes 5 seconds in (a second rendering runs all stages).
    clock.actions.append((5.0, lambda: render_nocloud(tmp_path)))
    fragments = list(CloudInitSource(wait=60).fragments(Host(tmp_path, clock=clock), []))
    assert [f.origin for f in fragments] == ["cloud-init user-data (part machine-agent.yaml)"]
    assert 5 <= clock.now_s < 7


def test_status_json_written_by_cloud_init_is_read_as_done(tmp_path: Path) -> None:
    nocloud_root(tmp_path, META, agent_user_data(AGENT), stages=2)  # init done, no result
    assert not (tmp_path / "run/cloud-init/result.json").exists()
    status = json.loads((tmp_path / "run/cloud-init/status.json").read_text())
    assert status["v1"]["init"]["finished"]
    clock = StepClock()
    fragments = list(CloudInitSource(wait=60).fragments(Host(tmp_path, clock=clock), []))
    assert len(fragments) == 1 and clock.now_s == 0
