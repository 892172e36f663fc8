"""The managed `kubeadm join`: safe to repeat, never leaves a half-joined node.

Before each attempt the node is either joined to this cluster (skip), clean, or partly
joined (what kubeadm wrote before it failed: reset with `kubeadm reset -f` first). After
a failed attempt the node is reset again, so a failure always leaves it clean. A failure
is classified by kubeadm's own words; temporary ones are retried with jittered backoff up
to `spec.join.maxAttempts`; an expired token makes the agent read the bootstrap data
again for a fresh one, and stop (never loop) when the token did not change. kubeadm's
lines reach the log as it prints them; every attempt is journaled with the tail of its
output (kept after a time-out too), secrets redacted.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Collection
from typing import Any, Literal

from agent.errors import AgentError, CommandError, CommandTimeoutError, PermanentError, Reason
from agent.host import Host
from agent.kube.facts import MachineFacts
from agent.kube.workload import KUBELET_CONF
from agent.logs import REDACT
from agent.phases.base import PhaseContext
from agent.phases.join.classify import Classified, classify_output, last_line
from agent.phases.join.cloudconfig import WriteFile
from agent.phases.join.ondisk import current_content
from agent.phases.join.result import JoinAttempt, JoinInFlight, JoinRecord, KubeadmReset
from agent.recordtype import record
from agent.retry import Backoff

# What `kubeadm join` writes on a worker (cmd/kubeadm/app/cmd/phases/join/kubelet.go:
# bootstrap kubeconfig, CA, kubelet config and flags, then the kubelet's kubelet.conf).
# On a control plane (init, or a join with controlPlane) also the static Pod manifests
# and admin.conf (app/phases/controlplane, etcd, kubeconfig).
JOIN_FILES = (KUBELET_CONF, "/etc/kubernetes/bootstrap-kubelet.conf",
              "/etc/kubernetes/pki/ca.crt", "/var/lib/kubelet/config.yaml",
              "/var/lib/kubelet/kubeadm-flags.env", "/etc/kubernetes/admin.conf",
              "/etc/kubernetes/manifests/kube-apiserver.yaml",
              "/etc/kubernetes/manifests/etcd.yaml")
ATTEMPTS_KEPT = 20
OUTPUT_TAIL = 1000
"""Characters of each attempt's kubeadm output kept in the journal (the log has it all)."""

NodeState = Literal["joined", "partial", "clean"]
CONTROL_PLANE_LABEL = "node-role.kubernetes.io/control-plane"
"""Set by kubeadm's mark-control-plane phase, the last of a control-plane join."""


@record(frozen=True)
class JoinTarget:
    """What one join attempt uses. `files` are rewritten after a reset (kubeadm reset
    removes /etc/kubernetes/pki, where control-plane bootstrap data puts certificates)."""

    config_path: str
    files: tuple[WriteFile, ...]
    token: str | None
    expected_server: str | None
    node_name: str
    ignore_preflight_errors: tuple[str, ...]
    control_plane: bool = False
    command: str = "join"
    """`join`, or `init` on the first control plane (the same management: reset and
    retry, classified failures)."""
    local_server: str | None = None
    """A control plane's own API server URL, which its kubelet.conf may name instead."""

    @property
    def brought(self) -> frozenset[str]:
        """The paths the bootstrap data writes (no sign of an earlier kubeadm)."""
        return frozenset(wf.path for wf in self.files)

    @property
    def servers(self) -> tuple[str, ...]:
        """The servers a kubelet.conf of this node joined to this cluster names."""
        return tuple(s for s in (self.expected_server, self.local_server) if s)


def kubeconfig_server(text: str | None) -> str | None:
    """The server of a kubeconfig's current context (or its only cluster)."""
    import yaml

    from agent import yamlsafe

    if not text:
        return None
    try:
        doc = yamlsafe.load(text)
    except yaml.YAMLError:
        return None
    if not isinstance(doc, dict):
        return None
    clusters = {c.get("name"): c.get("cluster", {}) for c in doc.get("clusters") or []
                if isinstance(c, dict)}
    contexts = {c.get("name"): c.get("context", {}) for c in doc.get("contexts") or []
                if isinstance(c, dict)}
    current = contexts.get(doc.get("current-context"), {})
    cluster = clusters.get(current.get("cluster")) if isinstance(current, dict) else None
    if cluster is None and len(clusters) == 1:
        cluster = next(iter(clusters.values()))
    server = cluster.get("server") if isinstance(cluster, dict) else None
    return server if isinstance(server, str) else None


def node_state(host: Host, expected_server: str | tuple[str, ...] | None,
               record: JoinRecord | None = None, brought: Collection[str] = ()) -> NodeState:
    """Joined to `expected_server` (one of them: a control plane's kubelet.conf may name
    its own API server), partly joined, or clean. `record` is the join phase's journal
    section: a join journaled as started (`in_flight`: before kubeadm starts; kubeadm
    writes kubelet.conf long before it is done, a control plane's etcd member and
    mark-control-plane come after) and not as finished (the agent was killed while
    kubeadm ran) counts as joined only on evidence a completed join leaves
    (`completed_join`); else the node is partly joined, and reset. `brought` are the
    paths the bootstrap data writes itself: no sign of kubeadm (CABPK writes the
    cluster's CA files on every control plane, /etc/kubernetes/pki/ca.crt among them)."""
    server = kubeconfig_server(host.read_text(KUBELET_CONF))
    expected = (expected_server,) if isinstance(expected_server, str) else expected_server
    if server is not None and server in (expected or ()):
        started = record.in_flight if record is not None else None
        if started is None:
            return "joined"
        # `plan` (a read-only host) cannot ask: the join stays planned, and the managed
        # join decides when it runs.
        return "joined" if not host.read_only and completed_join(host, started) else "partial"
    return "partial" if any(host.exists(p) for p in JOIN_FILES if p not in brought) \
        else "clean"


def completed_join(host: Host, started: JoinInFlight) -> bool:
    """Whether an interrupted join finished: the Node is registered, read with the
    kubelet's own credentials from kubelet.conf (the cluster trusts them, and the kubelet
    runs with them: it registered), and for a control-plane join marked control plane.
    An unreachable cluster raises (temporary): a good node is never reset on a guess."""
    from agent.kube.workload import KubeconfigCluster

    cluster = KubeconfigCluster(host, KUBELET_CONF, reason=Reason.KubeletNotHealthy,
                                missing_hint="kubeadm join writes it")
    node = cluster.node(started.node)
    if node is None:
        return False
    if started.control_plane:
        labels: dict[str, Any] = (node.get("metadata") or {}).get("labels") or {}
        return CONTROL_PLANE_LABEL in labels
    return True


class ManagedJoin:
    def __init__(self, ctx: PhaseContext, host: Host, kubeadm: str,
                 resolve: Callable[[MachineFacts | None], JoinTarget]) -> None:
        self.ctx = ctx
        self.host = host
        self.kubeadm = kubeadm
        self.resolve = resolve
        self.spec = ctx.config.spec.join
        self._previous: JoinTarget | None = None
        """The target whose files the last attempt wrote (None: the plan wrote them)."""

    def run(self, target: JoinTarget) -> None:
        limit = self.spec.max_attempts
        backoff = Backoff(base=self.spec.retry_delay, cap=self.spec.retry_delay * 8,
                          attempts=limit)
        last: AgentError | None = None
        for attempt in range(1, limit + 1):
            state = node_state(self.host, target.servers, self._journal(), target.brought)
            if state == "joined":
                self._finished()
                self._record(attempt, "already-joined", None, reset=False)
                return
            reset = state == "partial"
            if reset:
                self._reset(f"attempt {attempt}: the node is partly joined")
            self._write_files(target)
            self.ctx.progress(f"kubeadm {target.command}, attempt {attempt} of {limit}")
            self._journal().in_flight = JoinInFlight(attempt, self._now(), target.node_name,
                                                     target.control_plane)
            self.ctx.journal.save()  # before kubeadm starts: a kill from here on is seen
            outcome, output = self._join(target)
            if outcome is None:
                self._finished()  # kubeadm exited 0: whatever it wrote is a whole join
                if node_state(self.host, target.servers) != "joined":
                    outcome = Classified(Reason.KubeletNotHealthy,
                                         f"kubeadm {target.command} exited 0 but wrote no "
                                         "kubelet.conf for this cluster", True)
                else:
                    self._record(attempt, "joined", None, reset=reset, output=output)
                    return
            self._record(attempt, "failed", outcome, reset=reset, output=output)
            if node_state(self.host, target.servers, self._journal(),
                          target.brought) != "clean":
                self._reset(f"attempt {attempt} failed ({outcome.reason})")
            last = _error(outcome, attempt, target.command)
            if outcome.reason is Reason.TokenExpired:
                target = self._fresh_token(target, last)
                continue
            if not outcome.temporary:
                raise last
            if attempt < limit:
                pause = backoff.delay(attempt - 1)
                self.ctx.log.warning("join attempt %d failed (%s); retrying in %.1fs",
                                     attempt, outcome.reason, pause)
                self.host.clock.sleep(pause)
        assert last is not None
        raise PermanentError(f"kubeadm {target.command} failed {limit} time(s); last: "
                             f"{last.message}",
                             reason=last.reason, hint=last.hint)

    def _join(self, target: JoinTarget) -> tuple[Classified | None, str]:
        """Run kubeadm join, its output streamed to the log as it comes; the outcome
        (None: it exited 0) and the tail of its output (kept after a time-out too)."""
        argv = [self.kubeadm, target.command, "--config", target.config_path]
        if target.ignore_preflight_errors:
            argv.append("--ignore-preflight-errors=" + ",".join(target.ignore_preflight_errors))
        result = self.host.stream(argv, lambda line: self.ctx.log.info("kubeadm: %s", line),
                                  timeout=self.spec.timeout, sandboxed=False)
        tail = REDACT(result.tail(OUTPUT_TAIL))
        if result.timed_out:
            last = last_line(result.stdout)
            return Classified(Reason.JoinTimeout,
                              f"kubeadm {target.command} did not finish within "
                              f"{self.spec.timeout:g}s",
                              True, f"its last line: {last}" if last else ""), tail
        return (None if result.ok else classify_output(result.stdout, result.returncode)), tail

    def _reset(self, why: str) -> None:
        self.ctx.log.info("kubeadm reset -f: %s", why)
        try:
            result = self.host.run([self.kubeadm, "reset", "-f"], timeout=120, check=False,
                                   sandboxed=False)
        except CommandTimeoutError as err:
            raise PermanentError(f"kubeadm reset -f did not finish: {err.message}",
                                 reason=Reason.CommandTimeout) from err
        self.ctx.journal.section(JoinRecord).resets.append(
            KubeadmReset(self._now(), why, result.returncode))
        if result.ok:
            self._journal().in_flight = None  # clean again: no join in flight
        self.ctx.journal.save()
        if not result.ok:
            raise CommandError(f"kubeadm reset -f exited {result.returncode}: "
                               f"{REDACT(result.tail(500))}",
                               hint="the node is partly joined; reset it by hand")

    def _fresh_token(self, target: JoinTarget, error: AgentError) -> JoinTarget:
        reload = self.ctx.reload_machine
        if reload is None:
            raise error
        self.ctx.progress("the bootstrap token expired; reading the bootstrap data again")
        machine = reload()
        fresh = self.resolve(machine)
        if fresh.token is None or fresh.token == target.token:
            raise PermanentError(
                f"{error.message}; the bootstrap data read again still has the same token",
                reason=Reason.TokenExpired,
                hint="the bootstrap provider must rotate the token (CABPK refreshes it "
                     "while the Machine is not yet a Node); the agent does not retry a "
                     "dead token")
        self.ctx.machine = machine
        return fresh

    def _write_files(self, target: JoinTarget) -> None:
        """Write again what a reset removed (kubeadm reset deletes /etc/kubernetes/pki) and
        what a fresh token changed; a file the pre-commands edited (envsubst, sed on the
        kubeadm config, as CAPI templates do) is otherwise left as they made it."""
        before = {wf.path: wf.content for wf in self._previous.files} if self._previous \
            else {}
        self._previous = target
        for wf in target.files:
            if wf.append:
                continue
            current = current_content(self.host, wf.path)
            if current is None or before.get(wf.path, wf.content) != wf.content:
                self.host.write_file(wf.path, wf.content, mode=wf.mode,
                                     owner=owner_ids(self.host, wf.owner))

    def _record(self, attempt: int, outcome: str, why: Classified | None, *,
                reset: bool, output: str | None = None) -> None:
        entry = JoinAttempt(attempt, self._now(), outcome, reset,
                            REDACT(output) if output is not None else None)
        if why is not None:
            entry.reason = str(why.reason)
            entry.message = REDACT(f"{why.summary}: {why.detail}" if why.detail
                                   else why.summary)
        attempts = self.ctx.journal.section(JoinRecord).attempts
        attempts.append(entry)
        del attempts[:-ATTEMPTS_KEPT]
        self.ctx.journal.save()

    def _finished(self) -> None:
        record = self._journal()
        if record.in_flight is not None:
            record.in_flight = None
            self.ctx.journal.save()

    def _journal(self) -> JoinRecord:
        return self.ctx.journal.section(JoinRecord)

    def _now(self) -> str:
        return self.host.clock.now().strftime("%Y-%m-%dT%H:%M:%SZ")


def _error(outcome: Classified, attempt: int, command: str = "join") -> AgentError:
    detail = f": {outcome.detail}" if outcome.detail else ""
    return AgentError(REDACT(f"kubeadm {command} attempt {attempt}: {outcome.summary}"
                             f"{detail}"),
                      reason=outcome.reason, temporary=outcome.temporary)


def owner_ids(host: Host, owner: tuple[str, str]) -> tuple[int, int] | None:
    """uid and gid from the node's own /etc/passwd and /etc/group (under the root);
    None when they are the agent's own (nothing to change)."""
    ids = []
    for name, table in ((owner[0], "/etc/passwd"), (owner[1], "/etc/group")):
        text = host.read_text(table) or ""
        found = next((int(parts[2]) for line in text.splitlines()
                      if len(parts := line.split(":")) > 2 and parts[0] == name), None)
        if found is None and name == "root":
            found = 0
        if found is None:
            raise PermanentError(f"the bootstrap data wants owner {name!r}, which "
                                 f"{table} does not know", reason=Reason.ConfigInvalid,
                                 hint="create the user in the image or fix the owner")
        ids.append(found)
    uid, gid = ids
    return None if (uid, gid) == (os.geteuid(), os.getegid()) else (uid, gid)
