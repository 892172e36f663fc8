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
from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

from agent.errors import AgentError, CommandError, CommandTimeoutError, PermanentError, Reason
from agent.host import Host
from agent.kube.facts import MachineFacts
from agent.kube.workload import KUBELET_CONF
from agent.logs import REDACT
from agent.phases.base import PhaseContext
from agent.phases.join.classify import Classified, classify_output, last_line
from agent.phases.join.cloudconfig import WriteFile
from agent.phases.join.result import JoinAttempt, JoinRecord, KubeadmReset
from agent.retry import Backoff

# What `kubeadm join` writes on a worker (cmd/kubeadm/app/cmd/phases/join/kubelet.go:
# bootstrap kubeconfig, CA, kubelet config and flags, then the kubelet's kubelet.conf).
JOIN_FILES = (KUBELET_CONF, "/etc/kubernetes/bootstrap-kubelet.conf",
              "/etc/kubernetes/pki/ca.crt", "/var/lib/kubelet/config.yaml",
              "/var/lib/kubelet/kubeadm-flags.env")
ATTEMPTS_KEPT = 20
OUTPUT_TAIL = 1000
"""Characters of each attempt's kubeadm output kept in the journal (the log has it all)."""

NodeState = Literal["joined", "partial", "clean"]


@dataclass(frozen=True)
class JoinTarget:
    """What one join attempt uses. `files` are rewritten after a reset (kubeadm reset
    removes /etc/kubernetes/pki, where control-plane bootstrap data puts certificates)."""

    config_path: str
    files: tuple[WriteFile, ...]
    token: str | None
    expected_server: str | None
    node_name: str
    ignore_preflight_errors: tuple[str, ...]


def kubeconfig_server(text: str | None) -> str | None:
    """The server of a kubeconfig's current context (or its only cluster)."""
    import yaml

    if not text:
        return None
    try:
        doc = yaml.safe_load(text)
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


def node_state(host: Host, expected_server: str | None) -> NodeState:
    server = kubeconfig_server(host.read_text(KUBELET_CONF))
    if server is not None and server == expected_server:
        return "joined"
    return "partial" if any(host.exists(p) for p in JOIN_FILES) else "clean"


class ManagedJoin:
    def __init__(self, ctx: PhaseContext, host: Host, kubeadm: str,
                 resolve: Callable[[MachineFacts | None], JoinTarget]) -> None:
        self.ctx = ctx
        self.host = host
        self.kubeadm = kubeadm
        self.resolve = resolve
        self.spec = ctx.config.spec.join

    def run(self, target: JoinTarget) -> None:
        limit = self.spec.max_attempts
        backoff = Backoff(base=self.spec.retry_delay, cap=self.spec.retry_delay * 8,
                          attempts=limit)
        last: AgentError | None = None
        for attempt in range(1, limit + 1):
            state = node_state(self.host, target.expected_server)
            if state == "joined":
                self._record(attempt, "already-joined", None, reset=False)
                return
            reset = state == "partial"
            if reset:
                self._reset(f"attempt {attempt}: the node is partly joined")
            self._write_files(target)
            self.ctx.progress(f"kubeadm join, attempt {attempt} of {limit}")
            outcome, output = self._join(target)
            if outcome is None:
                if node_state(self.host, target.expected_server) != "joined":
                    outcome = Classified(Reason.KubeletNotHealthy,
                                         "kubeadm join exited 0 but wrote no kubelet.conf "
                                         "for this cluster", True)
                else:
                    self._record(attempt, "joined", None, reset=reset, output=output)
                    return
            self._record(attempt, "failed", outcome, reset=reset, output=output)
            if node_state(self.host, target.expected_server) != "clean":
                self._reset(f"attempt {attempt} failed ({outcome.reason})")
            last = _error(outcome, attempt)
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
        raise PermanentError(f"kubeadm join failed {limit} time(s); last: {last.message}",
                             reason=last.reason, hint=last.hint)

    def _join(self, target: JoinTarget) -> tuple[Classified | None, str]:
        """Run kubeadm join, its output streamed to the log as it comes; the outcome
        (None: it exited 0) and the tail of its output (kept after a time-out too)."""
        argv = [self.kubeadm, "join", "--config", target.config_path]
        if target.ignore_preflight_errors:
            argv.append("--ignore-preflight-errors=" + ",".join(target.ignore_preflight_errors))
        result = self.host.stream(argv, lambda line: self.ctx.log.info("kubeadm: %s", line),
                                  timeout=self.spec.timeout, sandboxed=False)
        tail = REDACT(result.tail(OUTPUT_TAIL))
        if result.timed_out:
            last = last_line(result.stdout)
            return Classified(Reason.JoinTimeout,
                              f"kubeadm join did not finish within {self.spec.timeout:g}s",
                              True, f"its last line: {last}" if last else ""), tail
        return (None if result.ok else classify_output(result.stdout)), tail

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
        for wf in target.files:
            if wf.append:
                continue
            current = self.host.read_bytes(wf.path) if self.host.exists(wf.path) else None
            if current != wf.content:
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

    def _now(self) -> str:
        return self.host.clock.now().strftime("%Y-%m-%dT%H:%M:%SZ")


def _error(outcome: Classified, attempt: int) -> AgentError:
    detail = f": {outcome.detail}" if outcome.detail else ""
    return AgentError(REDACT(f"kubeadm join attempt {attempt}: {outcome.summary}{detail}"),
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
