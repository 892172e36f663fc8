"""The differential suite: every case of the real kube-apiserver corpus (corpus/README.md)
replayed against the stand-in, each check compared with what the real server answered.

Each case gets a stand-in of its own, set up as the recording server was (users admin,
agent, other; Role machine-agent bound to agent in `default`; etcd compacted before the
case that watches from resourceVersion 1), and the cases run side by side, so the suite
takes about as long as its slowest case (the watches wait for their timeoutSeconds).
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from machine_agent_sandbox.apiserver import ApiServer

from sandbox.tests.integration.apiserver import replay

AGENT_RULES = [
    {"apiGroups": ["cluster.x-k8s.io"], "resources": ["machines"],
     "verbs": ["get", "list", "watch"]},
    {"apiGroups": ["cluster.x-k8s.io"], "resources": ["machines/status"],
     "verbs": ["get", "patch", "update"]},
    {"apiGroups": ["cluster.x-k8s.io"], "resources": ["clusters"], "verbs": ["get"]},
    {"apiGroups": [""], "resources": ["secrets"], "verbs": ["get"]},
    {"apiGroups": ["events.k8s.io"], "resources": ["events"], "verbs": ["create", "patch"]},
    {"apiGroups": [""], "resources": ["events"], "verbs": ["create", "patch"]},
    {"apiGroups": ["ipam.cluster.x-k8s.io"], "resources": ["ipaddressclaims"],
     "verbs": ["create", "get", "list", "watch", "delete"]},
    {"apiGroups": ["ipam.cluster.x-k8s.io"], "resources": ["ipaddresses"],
     "verbs": ["get", "list", "watch"]},
]


def recording_server(state_dir: Path) -> tuple[ApiServer, replay.Target]:
    """A stand-in set up as the server that recorded the corpus."""
    # no controllers ran there; the watch cache bookmarks about every 60 s
    server = ApiServer(state_dir, controllers=False, bookmark_interval=60.0).start()
    server.create({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role",
                   "metadata": {"name": "machine-agent", "namespace": "default"},
                   "rules": AGENT_RULES})
    server.create({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
                   "metadata": {"name": "machine-agent", "namespace": "default"},
                   "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role",
                               "name": "machine-agent"},
                   "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User",
                                 "name": "agent"}]})
    tokens: dict[str, str | None] = {
        "admin": server.make_token("admin", ["system:masters"]),
        "agent": server.make_token("agent", uid="agent-uid"),
        "other": server.make_token("other"),
        "bad": "bad-token-0000",
        "none": None,
    }

    def before_case(case: str) -> None:
        # The corpus was recorded after etcd's first compaction (README, finding 11).
        server.compact()

    return server, replay.Target(server.url, str(server.ca_path), tokens, before_case)


def replay_against_standin(path: Path, base: Path) -> list[replay.Check]:
    server, target = recording_server(base / path.stem)
    try:
        return replay.replay_case(path, target)
    finally:
        server.stop()


@pytest.fixture(scope="module")
def results(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, list[replay.Check]]]:
    base = tmp_path_factory.mktemp("differential")
    paths = replay.cases()
    with ThreadPoolExecutor(max_workers=len(paths)) as pool:
        checks = dict(zip((p.stem for p in paths),
                          pool.map(lambda p: replay_against_standin(p, base), paths),
                          strict=True))
    yield checks


@pytest.mark.parametrize("case", [p.stem for p in replay.cases()])
def test_the_standin_answers_as_the_real_server(
        case: str, results: dict[str, list[replay.Check]]) -> None:
    """Every check of the case: status, media type, Warning, body (Status reason, message
    and details included), managedFields, watch events."""
    checks = results[case]
    failed = [c for c in checks if not c.ok]
    assert checks
    assert not failed, f"{len(failed)} of {len(checks)} checks differ from the real server:\n" \
        + "\n".join(c.describe() for c in failed)


def main() -> None:
    """`python -m sandbox.tests.integration.apiserver.test_differential`: the match count."""
    import tempfile
    with tempfile.TemporaryDirectory() as tmp, ThreadPoolExecutor(17) as pool:
        paths = replay.cases()
        all_checks = [c for checks in pool.map(
            lambda p: replay_against_standin(p, Path(tmp)), paths) for c in checks]
    for c in all_checks:
        if not c.ok:
            print(c.describe())
    if "--ids" in sys.argv:
        print("\n".join(c.id for c in all_checks if not c.ok))
    print(f"{sum(c.ok for c in all_checks)} of {len(all_checks)} checks match")


if __name__ == "__main__":
    main()
