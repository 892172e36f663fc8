"""Configuration input bounded (issue 26 #4): YAML aliases refused (a few hundred bytes
of nested aliases stand for billions of values), documents over 1 MiB or nested deeper
than 64 levels refused with a clear error, merging linear (a flat 270 kB file took 88 s),
and an error echoing at most a short prefix of a value (one printed 50 MB).

Each load runs in a child with a time-out, a bound that makes a hang fail instead of
holding the suite up; speed itself is measured in bench/."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.allow_processes  # each load runs in a child, under a time-out
BOUND = 60.0
LOAD = """
import json, sys
from agent.config import load_config
from agent.config.sources import FileSource
from agent.errors import ConfigError
from agent.host import Host
from agent.kube.machine_config import ManagementSource

text = open(sys.argv[1]).read()
source = (ManagementSource("configmap site-a/worker-0-agent", text)
          if sys.argv[2] == "configmap" else FileSource(sys.argv[1], outside_root=True))
try:
    load_config(Host(sys.argv[3]), [source])
    print(json.dumps({"ok": True}))
except ConfigError as err:
    print(json.dumps({"ok": False, "errors": [str(e) for e in err.errors],
                      "message": str(err)}))
"""
HEAD = "apiVersion: machine-agent.io/v1alpha1\nkind: AgentConfig\n"


def load(tmp_path: Path, text: str, how: str = "file") -> dict[str, object]:
    path = tmp_path / "config.yaml"
    path.write_text(text)
    proc = subprocess.run([sys.executable, "-c", LOAD, str(path), how, str(tmp_path / "r")],
                          capture_output=True, text=True, timeout=BOUND, check=False)
    assert proc.returncode == 0, proc.stderr[-2000:]
    result: dict[str, object] = json.loads(proc.stdout)
    return result


def alias_bomb() -> str:
    lines = [HEAD + "spec:\n  ipam:\n    plugins:\n      capi:\n        pools:\n"
             "          a0: &a0 {name: p, kind: InClusterIPPool}\n"]
    lines.append("x: &b0 [*a0, *a0, *a0, *a0, *a0, *a0, *a0, *a0, *a0]\n")
    for i in range(1, 9):
        refs = ", ".join([f"*b{i - 1}"] * 9)
        lines.append(f"x{i}: &b{i} [{refs}]\n")
    return "".join(lines)


@pytest.mark.parametrize("how", ["file", "configmap"])
def test_a_yaml_alias_bomb_is_refused_at_once(tmp_path: Path, how: str) -> None:
    bomb = alias_bomb()
    assert len(bomb) < 800
    result = load(tmp_path, bomb, how)
    assert result["ok"] is False
    (error,) = result["errors"]  # type: ignore[misc]
    assert "uses a YAML alias (*a0) at line 9" in error
    assert "write the value out instead of referring to an anchor" in error


def test_a_document_over_the_size_limit_is_refused_saying_so(tmp_path: Path) -> None:
    result = load(tmp_path, HEAD + "# padding\n" * 120_000)  # 1.3 MB of comments
    assert result["ok"] is False
    (error,) = result["errors"]  # type: ignore[misc]
    assert "is larger than 1048576 bytes" in error and "under 1 MiB" in error


def test_a_document_nested_too_deeply_is_refused(tmp_path: Path) -> None:
    result = load(tmp_path, HEAD + "spec: " + "[" * 200 + "]" * 200 + "\n")
    assert result["ok"] is False
    assert "deeper than 64 levels" in str(result["errors"])


def test_a_flat_650_kb_document_is_merged_within_the_bound(tmp_path: Path) -> None:
    pools = "".join(f"     p{i}: {{name: p}}\n" for i in range(30_000))
    text = HEAD + "spec:\n ipam:\n  plugins:\n   capi:\n    pools:\n" + pools
    assert 650_000 < len(text) < 1 << 20
    assert load(tmp_path, text) == {"ok": True}


def test_an_error_echoes_a_short_prefix_of_a_huge_value(tmp_path: Path) -> None:
    huge = "x" * 400_000
    text = (f"apiVersion: {huge}\nkind: AgentConfig\nspec:\n  time:\n    syncTimeout: {huge}\n"
            f"  {huge[:1000]}: 1\n")  # YAML's longest plain key
    result = load(tmp_path, text)
    assert result["ok"] is False
    assert len(str(result["message"])) < 2000, len(str(result["message"]))
    assert "first 40 of 400000 characters" in str(result["message"])


def test_a_million_unknown_keys_list_fifty_errors_and_the_count(tmp_path: Path) -> None:
    keys = "".join(f"  k{i}: 1\n" for i in range(20_000))
    result = load(tmp_path, HEAD + "spec:\n" + keys)
    assert result["ok"] is False
    assert len(result["errors"]) == 20_000  # type: ignore[arg-type]
    assert "... and 19950 more" in str(result["message"])
    assert len(str(result["message"])) < 20_000
