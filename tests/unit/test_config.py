"""AgentConfig: validation reports everything with paths; sources merge with origins."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from agent.cli import main
from agent.config import load_config
from agent.config.fields import Duration
from agent.config.sources import default_sources
from agent.errors import ConfigError
from agent.host import Host

HEADER = "apiVersion: machine-agent.io/v1alpha1\nkind: AgentConfig\n"


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def test_validate_prints_every_mistake_with_its_path(tmp_path: Path,
                                                     capsys: pytest.CaptureFixture[str]) -> None:
    bad = write(tmp_path / "bad.yaml", HEADER + """spec:
  time:
    servers: [ntp1.example.net, "ntp..example", {host: ntp3.example.net, port: 70000}]
  network:
    interfaces:
      - name: eth0
        addresses: [{static: 192.0.2.10}]
""")
    assert main(["config", "validate", str(bad)]) == 2
    err = capsys.readouterr().err
    assert "3 errors" in err
    assert f'{bad}: spec.time.servers[1].host: "ntp..example" is not a valid host name' in err
    assert "spec.time.servers[2].port: 70000 is not a port" in err
    assert "spec.network.interfaces[0].addresses[0].static: \"192.0.2.10\" needs a prefix" in err


def test_unknown_field_suggests_the_right_one(tmp_path: Path) -> None:
    f = write(tmp_path / "c.yaml", HEADER + "spec:\n  tme: {}\n  network: {renderr: netplan}\n")
    with pytest.raises(ConfigError) as info:
        load_config(Host(tmp_path), default_sources([str(f)]))
    shown = [str(e) for e in info.value.errors]
    assert f"{f}: spec.tme: unknown field (did you mean 'time'?)" in shown
    assert f"{f}: spec.network.renderr: unknown field (did you mean 'renderer'?)" in shown


@pytest.mark.parametrize("server", ["ntp.example\nmakestep 1 -1", "ntp example", "ntp;rm -rf /",
                                    "$(reboot)", "ntp.example#x", ""])
def test_hostile_ntp_server_is_refused(tmp_path: Path, server: str) -> None:
    doc = {"apiVersion": "machine-agent.io/v1alpha1", "kind": "AgentConfig",
           "spec": {"time": {"servers": [{"host": server}]}}}
    f = write(tmp_path / "c.yaml", yaml.safe_dump(doc))
    with pytest.raises(ConfigError) as info:
        load_config(Host(tmp_path), default_sources([str(f)]))
    assert [e.path for e in info.value.errors] == ["spec.time.servers[0].host"]


def test_wrong_version_and_broken_yaml_name_the_file(tmp_path: Path) -> None:
    old = write(tmp_path / "old.yaml", "apiVersion: machine-agent.io/v0\nkind: AgentConfig\n")
    broken = write(tmp_path / "broken.yaml", HEADER + "spec:\n  time: [\n")
    with pytest.raises(ConfigError) as info:
        load_config(Host(tmp_path), default_sources([str(old), str(broken)]))
    shown = "\n".join(map(str, info.value.errors))
    assert f"{old}: apiVersion: 'machine-agent.io/v0' is not supported" in shown
    assert "use apiVersion: machine-agent.io/v1alpha1" in shown
    assert f"{broken}: (document): not valid YAML at line" in shown


def test_precedence_baked_then_drop_ins_then_command_line(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    root = tmp_path / "root"
    write(root / "etc/machine-agent/config.yaml", HEADER + """spec:
  time: {maxOffset: 1s, servers: [baked.example.net]}
  retry: {attempts: 2}
""")
    write(root / "etc/machine-agent/config.d/20-site.yaml",
          HEADER + "spec:\n  time: {maxOffset: 200ms}\n")
    write(root / "etc/machine-agent/config.d/10-base.yaml",
          HEADER + "spec:\n  time: {maxOffset: 500ms, servers: [dropin.example.net]}\n")
    cli = write(tmp_path / "cli.yaml", HEADER + "spec:\n  retry: {attempts: 7}\n")
    loaded = load_config(Host(root), default_sources([str(cli)]))
    spec = loaded.config.spec
    assert spec.time.max_offset == pytest.approx(0.2)
    assert [s.host for s in spec.time.servers] == ["dropin.example.net"]
    assert spec.retry.attempts == 7
    assert main(["--root", str(root), "config", "show", "--origin", "-c", str(cli)]) == 0
    out = capsys.readouterr().out
    assert 'spec.time.maxOffset = "200ms"  # /etc/machine-agent/config.d/20-site.yaml' in out
    assert "spec.time.servers = [" in out and "# /etc/machine-agent/config.d/10-base.yaml" in out
    assert f"spec.retry.attempts = 7  # {cli}" in out
    assert 'spec.retry.maxDelay = "1m"  # default' in out


def test_secrets_are_masked_in_config_show(tmp_path: Path,
                                           capsys: pytest.CaptureFixture[str]) -> None:
    """A field declared secret (here the join's bootstrap token) is shown masked, with and
    without --origin, at debug level too; the rest of the section is shown."""
    secret = "0123456789abcdef"
    root = tmp_path / "root"
    write(root / "etc/machine-agent/config.yaml", HEADER + f"""spec:
  join:
    discovery:
      bootstrapToken:
        token: abcdef.{secret}
        apiServerEndpoint: 203.0.113.10:6443
        caCertHashes: ["sha256:{"ab" * 32}"]
""")
    show = ["--root", str(root), "--log-level", "debug", "config", "show"]
    assert main(show) == 0
    shown = capsys.readouterr()
    token = yaml.safe_load(shown.out)["spec"]["join"]["discovery"]["bootstrapToken"]
    assert (token["token"], token["apiServerEndpoint"]) == ("***", "203.0.113.10:6443")
    assert secret not in shown.out + shown.err
    assert main([*show, "--origin"]) == 0
    shown = capsys.readouterr()
    assert ('spec.join.discovery.bootstrapToken.token = "***"  # '
            "/etc/machine-agent/config.yaml") in shown.out
    assert secret not in shown.out + shown.err


@pytest.mark.parametrize(("text", "seconds"), [("250ms", 0.25), ("30s", 30), ("5m", 300),
                                               ("1h", 3600), (12, 12)])
def test_durations(text: str | int, seconds: float) -> None:
    assert Duration.parse(text) == pytest.approx(seconds)


def test_examples_are_valid(capsys: pytest.CaptureFixture[str]) -> None:
    examples = sorted(str(p) for p in (Path(__file__).parents[2] / "examples").glob("*.yaml"))
    assert len(examples) >= 3
    for example in examples:
        assert main(["config", "validate", example]) == 0, capsys.readouterr().err
