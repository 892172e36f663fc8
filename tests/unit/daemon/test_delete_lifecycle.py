"""The daemon's delete lifecycle as a state machine: where each state may go, and what a
late timer does once the Machine is gone."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from agent.daemon.delete_lifecycle import MOVES, DeleteLifecycle, DeleteState
from agent.host import Host


def lifecycle(tmp_path: Path, state: DeleteState) -> tuple[DeleteLifecycle, list[Any]]:
    events: list[Any] = []
    it = DeleteLifecycle(Host(tmp_path), events.append, lambda: (None, None))
    it.state = state
    return it, events


def test_every_state_is_reached_from_idle_and_leads_back() -> None:
    assert set(MOVES) == set(DeleteState)
    reached, todo = {DeleteState.IDLE}, [DeleteState.IDLE]
    while todo:
        for nxt in MOVES[todo.pop()] - reached:
            reached.add(nxt)
            todo.append(nxt)
    assert reached == set(DeleteState)
    # the Machine gone ends every state but a policy that runs (it runs to its end)
    assert [s for s in DeleteState if DeleteState.IDLE not in MOVES[s]] == \
        [DeleteState.RUNNING]


@pytest.mark.parametrize("state", [DeleteState.RETRY, DeleteState.RELEASING])
def test_a_timer_due_after_the_machine_is_gone_does_nothing(
        tmp_path: Path, state: DeleteState) -> None:
    it, events = lifecycle(tmp_path, state)
    it.gone()
    it.again()  # would run the policy, or patch the hook, of a Machine that is gone
    assert it.state is DeleteState.IDLE and events == []


def test_a_stopped_policy_stays_stopped_until_a_restart(tmp_path: Path) -> None:
    it, _ = lifecycle(tmp_path, DeleteState.STOPPED)
    it.again()
    assert it.state is DeleteState.STOPPED
    with pytest.raises(AssertionError, match="from stopped to running"):
        it._move(DeleteState.RUNNING)
