"""Golden files: every renderer on a corpus of configurations. A case is a directory with
`input.yaml` (a `spec.network`) and `expected/`, the tree of files the agent writes.
Regenerate after an intended change with `python -m tests.unit.network.test_render_golden`
and review the diff."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
import yaml

from agent.phases.network.model import build_plan
from agent.phases.network.render import (
    render_cloud_init_dropin,
    render_dns,
    render_hostname,
    render_netplan,
    render_networkd,
)
from tests.unit.network.netconfig import network_spec

GOLDEN = Path(__file__).parent / "golden"
CASES = sorted(p.name for p in GOLDEN.iterdir() if (p / "input.yaml").exists())


def rendered(case: str) -> dict[str, str]:
    spec = network_spec(yaml.safe_load((GOLDEN / case / "input.yaml").read_text()))
    plan = build_plan(spec)
    files = {**render_networkd(plan), **render_netplan(plan),
             **render_dns(plan, spec.dns.backend), **render_cloud_init_dropin(),
             **render_hostname(plan, None)}
    if spec.dns.nameservers:  # the other DNS backend, from the same plan
        other = "resolv.conf" if spec.dns.backend == "resolved" else "resolved"
        files.update(render_dns(plan, other) if len(spec.dns.nameservers) <= 3 else {})
    return files


def test_corpus_covers_the_cases_the_issue_names() -> None:
    assert set(CASES) >= {"single-nic-static", "dual-stack", "vlan-on-bond",
                          "bridge-with-members", "extra-routes", "several-dns"}


@pytest.mark.parametrize("case", CASES)
def test_rendered_files_match_golden(case: str) -> None:
    files = rendered(case)
    expected_dir = GOLDEN / case / "expected"
    expected = {"/" + str(p.relative_to(expected_dir)): p.read_text()
                for p in sorted(expected_dir.rglob("*")) if p.is_file()}
    assert sorted(files) == sorted(expected)
    for path, content in files.items():
        assert content == expected[path], f"{case}: {path} differs from its golden file"


if __name__ == "__main__":
    for name in CASES:
        out = GOLDEN / name / "expected"
        shutil.rmtree(out, ignore_errors=True)
        for path, content in rendered(name).items():
            target = out / path.lstrip("/")
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(content)
        print(f"{name}: {len(rendered(name))} files")
