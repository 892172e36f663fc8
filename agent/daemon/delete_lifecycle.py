"""Where the daemon is with its Machine's deletion: a state machine over the agent's
pre-terminate hook and the delete policy (agent.daemon.deletion holds the policy's
steps and the hook's reading and writing).

The daemon hands it the Machine's updates while it is being deleted (`on_delete`), its
disappearance (`gone`), the delete policy's timer (`DeleteAgain`) and the credential's
(`CredentialCheck`); every move between states is checked against `MOVES`.
"""

from __future__ import annotations

import datetime as dt
import enum
import logging
import threading
from collections.abc import Callable
from typing import Any

from agent.daemon.deletion import (
    EXPIRY_MARGIN,
    HOOK,
    DeletePolicy,
    cleaned_up,
    hold,
    hook_release_due,
    hooked,
    kcp_holds,
    let_go,
    waiting_for_hook,
)
from agent.daemon.deletion import SUMMARY as DELETION_SUMMARY
from agent.errors import AgentError, Reason
from agent.host import Host
from agent.ipam.base import PluginEnv
from agent.orchestrator import Orchestrator
from agent.recordtype import record
from agent.retry import Backoff
from agent.session import Session
from agent.state import node_lock

log = logging.getLogger("agent.daemon")

DELETE_BACKOFF = Backoff(base=2.0, cap=300.0, attempts=0)
"""Pauses before the delete policy runs again after a temporary failure."""
CREDENTIAL_RECHECK = 300.0
"""Seconds between looks for a rotated credential once the hook came off for its expiry."""


@record(frozen=True)
class DeleteAgain:
    """Time to run the delete policy again: a step failed for a reason that may pass."""


@record(frozen=True)
class CredentialCheck:
    """Time to look whether the credential expires soon without a rotation
    (agent.daemon.deletion.hook_release_due)."""


class DeleteState(enum.Enum):
    IDLE = "idle"
    """Not being deleted (or the Machine is gone: a pending DeleteAgain does nothing)."""
    EXPIRING = "expiring"
    """The hook was taken off before the credential expires (not rotated)."""
    UNHOOKED = "unhooked"
    """Being deleted without the hook: CAPI does not wait; the policy does not run."""
    DRAINING = "draining"
    """Being deleted; CAPI drains the Node before it waits on pre-terminate hooks."""
    RUNNING = "running"
    """The delete policy runs."""
    RETRY = "retry"
    """A step failed for a reason that may pass: its DeleteAgain is due."""
    STOPPED = "stopped"
    """A step failed for good: a person decides (a restart runs the policy again)."""
    RELEASING = "releasing"
    """The policy is done; taking the hook off failed and is due again."""
    DONE = "done"
    """The policy is done and the hook is off: CAPI goes on."""

    @property
    def policy_owns_hook(self) -> bool:
        """The delete policy started: the credential's expiry no longer moves the hook."""
        return self in {DeleteState.RUNNING, DeleteState.RETRY, DeleteState.STOPPED,
                        DeleteState.RELEASING, DeleteState.DONE}


_BEFORE_POLICY = {DeleteState.IDLE, DeleteState.EXPIRING, DeleteState.UNHOOKED,
                  DeleteState.DRAINING}
_RELEASED = {DeleteState.RELEASING, DeleteState.DONE}
MOVES: dict[DeleteState, set[DeleteState]] = {
    **{s: _BEFORE_POLICY | {DeleteState.RUNNING} | _RELEASED for s in _BEFORE_POLICY},
    DeleteState.RUNNING: {DeleteState.RUNNING, DeleteState.RETRY, DeleteState.STOPPED,
                          *_RELEASED},
    DeleteState.RETRY: {DeleteState.IDLE, DeleteState.RETRY, DeleteState.RUNNING},
    DeleteState.STOPPED: {DeleteState.IDLE, DeleteState.STOPPED},
    DeleteState.RELEASING: {DeleteState.IDLE, *_RELEASED},
    DeleteState.DONE: {DeleteState.IDLE, *_RELEASED},
}
"""Where each state may go. The Machine gone (IDLE) ends any but a running policy."""


def put_after(put: Callable[[Any], None], seconds: float, event: Any) -> None:
    """Put `event` with `put` after `seconds` (a daemon timer: a stop does not wait)."""
    timer = threading.Timer(max(0.0, seconds), put, (event,))
    timer.daemon = True
    timer.start()


class DeleteLifecycle:
    """The hook and the delete policy of the daemon's current session (`current`)."""

    def __init__(self, host: Host, put: Callable[[Any], None],
                 current: Callable[[], tuple[Session | None, Orchestrator | None]]) -> None:
        self.host = host
        self._put = put
        self._current = current
        self.state = DeleteState.IDLE
        self._failures = 0
        self._kcp_cleanup = False
        """KubeadmControlPlane's hook was on the Machine when its deletion was last seen."""
        self.holding: bool | None = None
        """Whether the agent's hook is on its Machine as this daemon last set it (None:
        not set yet by this daemon)."""

    def _move(self, to: DeleteState) -> None:
        if to not in MOVES[self.state]:
            raise AssertionError(f"the delete lifecycle cannot go from {self.state.value} "
                                 f"to {to.value}")
        self.state = to

    def gone(self) -> None:
        """The Machine is gone: nothing more to do for it."""
        self._move(DeleteState.IDLE)
        self.holding = False  # gone with it

    def again(self) -> None:
        """A DeleteAgain came due."""
        if self.state is DeleteState.RETRY:
            self._run_policy()
        elif self.state is DeleteState.RELEASING:
            self._release_hook()

    def on_delete(self, obj: dict[str, Any]) -> None:
        """The Machine (`obj`) is being deleted."""
        session, orchestrator = self._current()
        assert session is not None and session.machine is not None
        assert orchestrator is not None
        facts = session.machine.facts
        if cleaned_up(orchestrator.journal, facts.uid):
            if hooked(obj) and self.state is not DeleteState.RELEASING:
                self._release_hook()  # cleaned up, but stopped before the hook was off
            return
        if not hooked(obj):
            if self.state is not DeleteState.UNHOOKED:
                log.warning("Machine %s/%s is being deleted without the agent's "
                            "pre-terminate hook (%s): CAPI does not wait for the delete "
                            "policy; the node is left as it is", facts.namespace,
                            facts.name, HOOK)
                self._move(DeleteState.UNHOOKED)
            return
        if not waiting_for_hook(obj):
            if self.state is not DeleteState.DRAINING:
                log.info("Machine %s/%s is being deleted: spec.lifecycle.onDelete runs "
                         "once CAPI has drained the Node and waits on pre-terminate hooks",
                         facts.namespace, facts.name)
                self._move(DeleteState.DRAINING)
            return
        self._kcp_cleanup = kcp_holds(obj)
        if self.state in (DeleteState.RETRY, DeleteState.STOPPED):
            return  # DeleteAgain runs it again; or a person decides
        self._run_policy()

    def _run_policy(self) -> None:
        with node_lock(self.host, "daemon (delete policy)"):
            self._run_policy_locked()

    def _run_policy_locked(self) -> None:
        session, orchestrator = self._current()
        assert session is not None and session.machine is not None
        assert orchestrator is not None
        facts = session.machine.facts
        log.info("Machine %s/%s is being deleted and CAPI waits on pre-terminate hooks: "
                 "running spec.lifecycle.onDelete", facts.namespace, facts.name)
        self._move(DeleteState.RUNNING)
        error = DeletePolicy(self.host, session.loaded.config, orchestrator.journal,
                             orchestrator.conditions, publisher(orchestrator), facts.uid,
                             PluginEnv(self.host, facts, session.client),
                             orchestrator.results, self._kcp_cleanup).run()
        if error is None:
            self._release_hook()
        elif error.temporary:
            self._move(DeleteState.RETRY)
            pause = self._again_later()
            log.info("running spec.lifecycle.onDelete again in %.0fs; the pre-terminate "
                     "hook holds the Machine meanwhile", pause)
        else:
            self._move(DeleteState.STOPPED)
            log.error("spec.lifecycle.onDelete stopped; the pre-terminate hook holds "
                      "Machine %s/%s: restart the service to try again, or remove its "
                      "annotation %s to let CAPI delete it without the cleanup",
                      facts.namespace, facts.name, HOOK)

    def _release_hook(self) -> None:
        """The node is cleaned up: CAPI may go on. Tried again until the hook is off (a
        watch that resumes after an outage brings no update of an unchanged Machine)."""
        if self.hold(False):
            self._move(DeleteState.DONE)
            return
        self._move(DeleteState.RELEASING)
        pause = self._again_later()
        log.info("taking the pre-terminate hook off again in %.0fs", pause)

    def _again_later(self) -> float:
        self._failures += 1
        pause = DELETE_BACKOFF.delay(min(self._failures, 10))
        put_after(self._put, pause, DeleteAgain())
        return pause

    def check_credential(self) -> None:
        """Take the hook off before the credential expires unless it was rotated; put it
        back once a rotated one appears (agent.daemon.deletion, "A credential that
        expires"). A timer, set for when it is due, brings the next check."""
        session, orchestrator = self._current()
        if session is None or session.client is None or orchestrator is None:
            return
        if self.state.policy_owns_hook:
            return
        due = hook_release_due(session.client.creds)
        if due is None:
            return
        now = self.host.clock.now()
        if due > now:
            if self.state is DeleteState.EXPIRING and self.hold(True):
                self._move(DeleteState.IDLE)
                log.info("the credential was rotated: the pre-terminate hook is on again")
            self.check_credential_in((due - now).total_seconds())
            return
        # look again later: a rotated token puts the hook back on
        self.check_credential_in(CREDENTIAL_RECHECK)
        if self.state is DeleteState.EXPIRING or not self.hold(False):
            return
        self._move(DeleteState.EXPIRING)
        message = (f"the management credential expires at "
                   f"{(due + dt.timedelta(seconds=EXPIRY_MARGIN)):%Y-%m-%dT%H:%M:%SZ} and "
                   f"was not rotated: the pre-terminate hook {HOOK} was taken off so that a "
                   "deletion of this Machine is not held for ever; spec.lifecycle.onDelete "
                   "will not run")
        log.error("%s", message)
        orchestrator.conditions.set(DELETION_SUMMARY, "False", Reason.CredentialExpiring,
                                    message)
        publisher(orchestrator)(True)

    def check_credential_in(self, seconds: float) -> None:
        put_after(self._put, seconds, CredentialCheck())

    def hold_while_running(self) -> None:
        """Put the agent's pre-terminate hook on its Machine while the agent runs for it:
        from the start of the bootstrap (a Machine deleted meanwhile is held, and its
        delete policy runs once the bootstrap ends) until the agent stops (`let_go`).
        Off when the configuration runs no delete policy. A Machine already being
        deleted keeps it as it is: put on now, it could stop CAPI past that point; taken
        off, CAPI would go on without the delete policy. No request when the hook is
        already as wanted."""
        session, _ = self._current()
        if session is None or session.machine is None or session.client is None or \
                session.machine.deletion_timestamp:
            return
        lifecycle = session.loaded.config.spec.lifecycle
        held = lifecycle.watch and bool(lifecycle.on_delete.steps)
        if self.holding is held:
            return
        if self.hold(held) and held:
            self.check_credential()

    def let_go(self) -> None:
        """The agent stops (a stop, a shutdown, or it gives up): a Machine that is not
        being deleted is not held by an agent that no longer runs, so the hook comes
        off; the next start puts it on again. While its deletion is under way the delete
        policy keeps the hook (the next start runs it)."""
        session, _ = self._current()
        if not self.holding or self.state is not DeleteState.IDLE or session is None or \
                session.machine is None or session.client is None:
            return
        try:
            if let_go(session.client, session.machine):
                self.holding = False
                log.info("stopping: the pre-terminate hook %s is off (the Machine is held "
                         "only while the agent runs)", HOOK)
            else:
                log.info("stopping: the Machine is being deleted; the pre-terminate hook "
                         "%s stays for the delete policy, which the next start runs", HOOK)
        except AgentError as err:
            log.warning("stopping: could not take the pre-terminate hook %s off: %s",
                        HOOK, err)

    def hold(self, held: bool) -> bool:
        """Put the agent's pre-terminate hook on its Machine or take it off; whether
        that was done."""
        session, _ = self._current()
        assert session is not None and session.machine is not None
        assert session.client is not None
        try:
            hold(session.client, session.machine, held)
            self.holding = held
            return True
        except AgentError as err:
            # Not put on (e.g. an RBAC without patch on machines): CAPI will not wait for
            # the delete policy; the next start tries again.
            log.error("could not %s the pre-terminate hook %s: %s",
                      "put on" if held else "take off", HOOK, err)
            return False


def publisher(orchestrator: Orchestrator) -> Callable[[bool], None]:
    """Publish the orchestrator's conditions to its reporters (`final` as given)."""
    def publish(final: bool) -> None:
        for reporter in orchestrator.reporters:
            reporter.publish(orchestrator.conditions.all(), final)
    return publish
