"""The two state machines: every legal pair passes, every other pair raises and names both."""

from __future__ import annotations

import itertools

import pytest

from engine.lifecycle import CallStatus, IllegalTransition, TurnStatus
from engine.lifecycle import call as call_lifecycle
from engine.lifecycle import turn as turn_lifecycle

C = CallStatus
T = TurnStatus

# The seed's diagram, written out independently of engine/lifecycle/call.py, with the two
# edges out of `new` its TOOL_CALL sub-state machine implies (issue 14): a call the gate
# refuses fails, and one whose turn ends first is cancelled, without ever being `running`.
CALL_EDGES: dict[CallStatus, set[CallStatus]] = {
    C.NEW: {C.RUNNING, C.SUSPENDED, C.FAILED, C.CANCELLED},
    C.RUNNING: {C.SUSPENDED, C.SUCCEEDED, C.FAILED, C.CANCELLED},
    C.SUSPENDED: {C.RESUMING, C.CANCELLED},
    C.RESUMING: {C.RUNNING, C.SUSPENDED, C.SUCCEEDED, C.FAILED, C.CANCELLED},
    C.SUCCEEDED: set(),
    C.FAILED: set(),
    C.CANCELLED: set(),
}
TURN_EDGES: dict[TurnStatus, set[TurnStatus]] = {
    T.RUNNING: {T.WAITING, T.DONE},
    T.WAITING: {T.RUNNING, T.DONE},
    T.DONE: set(),
}


def _pairs(states: type[CallStatus] | type[TurnStatus], edges: dict) -> tuple[list, list]:
    legal, illegal = [], []
    for src, dst in itertools.product(states, repeat=2):
        pair = pytest.param(src, dst, id=f"{src.value}->{dst.value}")
        (legal if dst in edges[src] else illegal).append(pair)
    return legal, illegal


CALL_LEGAL, CALL_ILLEGAL = _pairs(CallStatus, CALL_EDGES)
TURN_LEGAL, TURN_ILLEGAL = _pairs(TurnStatus, TURN_EDGES)


# --- tool-call lifecycle -------------------------------------------------------------------


def test_call_states_are_exactly_the_seed_states() -> None:
    assert [s.value for s in CallStatus] == [
        "new",
        "running",
        "suspended",
        "resuming",
        "succeeded",
        "failed",
        "cancelled",
    ]


def test_call_table_is_the_seed_diagram_and_the_gate_edges() -> None:
    assert {s: set(d) for s, d in call_lifecycle.TRANSITIONS.items()} == CALL_EDGES


def test_call_pair_counts() -> None:
    assert len(CALL_LEGAL) == 15
    assert len(CALL_LEGAL) + len(CALL_ILLEGAL) == len(CallStatus) ** 2


def test_call_terminal_states_have_no_exits() -> None:
    terminal = {s for s in CallStatus if s.terminal}
    assert terminal == {C.SUCCEEDED, C.FAILED, C.CANCELLED}
    for s in CallStatus:
        assert (not call_lifecycle.TRANSITIONS[s]) == s.terminal


@pytest.mark.parametrize(("src", "dst"), CALL_LEGAL)
def test_call_legal_transition(src: CallStatus, dst: CallStatus) -> None:
    assert call_lifecycle.check(src, dst) is dst
    # The plain lowercase words stored in the database work too.
    assert call_lifecycle.check(src.value, dst.value) is dst


@pytest.mark.parametrize(("src", "dst"), CALL_ILLEGAL)
def test_call_illegal_transition(src: CallStatus, dst: CallStatus) -> None:
    with pytest.raises(IllegalTransition) as info:
        call_lifecycle.check(src, dst)
    assert f"{src.value} -> {dst.value}" in str(info.value)
    assert "tool call" in str(info.value)
    assert (info.value.src, info.value.dst) == (src.value, dst.value)
    with pytest.raises(IllegalTransition):
        call_lifecycle.check(src.value, dst.value)


# --- turn lifecycle ------------------------------------------------------------------------


def test_turn_states() -> None:
    assert [s.value for s in TurnStatus] == ["running", "waiting", "done"]


def test_turn_table_is_exact() -> None:
    assert {s: set(d) for s, d in turn_lifecycle.TRANSITIONS.items()} == TURN_EDGES


@pytest.mark.parametrize(("src", "dst"), TURN_LEGAL)
def test_turn_legal_transition(src: TurnStatus, dst: TurnStatus) -> None:
    reason = "cancelled" if dst is TurnStatus.DONE else None
    assert turn_lifecycle.check(src, dst, reason) is dst
    assert turn_lifecycle.check(src.value, dst.value, reason) is dst


@pytest.mark.parametrize("reason", ["natural", "behavior_requested", "stopped:max_rounds", None])
def test_a_waiting_turn_ends_only_as_the_seed_allows(reason: str | None) -> None:
    """The seed's table: waiting -> done only Cancelled or with an Error (issue 28). Any
    other ending is reached running again, after a decision."""
    for allowed in ("cancelled", "error"):
        assert turn_lifecycle.check("waiting", "done", allowed) is TurnStatus.DONE
    assert turn_lifecycle.check("running", "done", reason) is TurnStatus.DONE
    with pytest.raises(IllegalTransition, match="a waiting turn ends only"):
        turn_lifecycle.check("waiting", "done", reason)


@pytest.mark.parametrize(("src", "dst"), TURN_ILLEGAL)
def test_turn_illegal_transition(src: TurnStatus, dst: TurnStatus) -> None:
    with pytest.raises(IllegalTransition) as info:
        turn_lifecycle.check(src, dst)
    assert f"{src.value} -> {dst.value}" in str(info.value)
    assert "turn" in str(info.value)
    assert (info.value.src, info.value.dst) == (src.value, dst.value)


def test_turn_pair_counts() -> None:
    assert len(TURN_LEGAL) == 4
    assert len(TURN_ILLEGAL) == 5


# --- termination reasons -------------------------------------------------------------------


@pytest.mark.parametrize(
    "reason",
    [
        "natural",
        "behavior_requested",
        "cancelled",
        "suspended",
        "error",
        "stopped:max_rounds",
        "stopped:timeout",
        "stopped:x",
        turn_lifecycle.stopped("consecutive_errors"),
    ],
)
def test_valid_reasons(reason: str) -> None:
    assert turn_lifecycle.is_valid_reason(reason)


@pytest.mark.parametrize(
    "reason", ["", "stopped:", "stopped", "done", "Natural", "NATURAL", " natural", "waiting"]
)
def test_invalid_reasons(reason: str) -> None:
    assert not turn_lifecycle.is_valid_reason(reason)


def test_stopped_builds_the_reason() -> None:
    assert turn_lifecycle.stopped("max_rounds") == "stopped:max_rounds"
    assert set(turn_lifecycle.REASONS) == {
        "natural",
        "behavior_requested",
        "cancelled",
        "suspended",
        "error",
        "budget",
    }
