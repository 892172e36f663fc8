"""A third-party plugin is found by its entry point alone: the example in docs/ipam.md,
installed as a distribution on sys.path (a `*.dist-info` with entry_points.txt), is
opened by name with its checked settings."""

from __future__ import annotations

import re
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from agent.errors import ConfigError, PermanentError
from agent.host import Host
from agent.ipam.base import ClaimRequest, PluginEnv, PoolNotFound, open_plugin

DOC = Path(__file__).parents[3] / "docs" / "ipam.md"


@pytest.fixture
def installed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """The doc's example plugin, installed the way pip leaves a distribution."""
    text = DOC.read_text()
    (code,) = re.findall(r"```python\n# example_ipam.py\n(.*?)```", text, re.S)
    (toml,) = re.findall(r'\[project.entry-points."machine_agent.ipam"\]\n(.*?)\n```', text,
                         re.S)
    site = tmp_path / "site-packages"
    dist = site / "example_ipam-1.0.dist-info"
    dist.mkdir(parents=True)
    (site / "example_ipam.py").write_text(code)
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: example-ipam\nVersion: 1.0\n")
    name, _, target = toml.strip().partition(" = ")  # TOML quotes; entry_points.txt none
    target = target.strip('"')
    (dist / "entry_points.txt").write_text(f"[machine_agent.ipam]\n{name} = {target}\n")
    monkeypatch.syspath_prepend(str(site))
    yield site
    sys.modules.pop("example_ipam", None)


def request(interface: str) -> ClaimRequest:
    return ClaimRequest(claim_key=f"uid/{interface}/ipv4", pool="any", family="ipv4",
                        interface=interface)


def test_the_documented_plugin_is_found_by_its_entry_point(installed: Path,
                                                           tmp_path: Path) -> None:
    plugin = open_plugin("example", {"example": {
        "interfaces": {"eth0": {"address": "192.0.2.10/24"}}, "gateway": "192.0.2.1"}},
        PluginEnv(Host(tmp_path)))
    alloc = plugin.claim(request("eth0"))
    assert (alloc.address, alloc.prefix, alloc.gateway) == ("192.0.2.10", 24, "192.0.2.1")
    with pytest.raises(PoolNotFound):
        plugin.claim(request("eth1"))


def test_its_settings_are_checked_with_their_full_path(installed: Path,
                                                       tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as info:
        open_plugin("example", {"example": {"interfaces": {"eth0": {"address": "192.0.2.10"}},
                                            "gatway": "192.0.2.1"}},
                    PluginEnv(Host(tmp_path)))
    text = str(info.value)
    assert "spec.ipam.plugins.example.interfaces.eth0.address" in text
    assert "spec.ipam.plugins.example.gatway" in text


def test_an_unknown_plugin_names_the_installed_ones(installed: Path, tmp_path: Path) -> None:
    with pytest.raises(PermanentError) as info:
        open_plugin("exmaple", {}, PluginEnv(Host(tmp_path)))
    assert "no IPAM plugin named 'exmaple'" in info.value.message
    assert "capi, example, nautobot, netbox, static" in str(info.value.hint)
