"""The view state folds events correctly and boundedly; the bridge coalesces per frame."""

from __future__ import annotations

from enum import Enum
from typing import Literal, NamedTuple, get_args, get_origin

import pytest

from console import state as state_mod
from console.bridge import Bridge
from console.state import DeckState
from engine.domain.events import (
    CallChanged,
    DecisionRecorded,
    Event,
    StepFinished,
    StepStarted,
    TextDelta,
    TurnChanged,
    TurnStarted,
)


def _turn(i: int) -> list:
    t, th = f"t_{i}", f"chat:{i % 3}"
    return [
        TurnStarted(at=1, thread_id=th, turn_id=t, origin="chat", sender="operator", text="x"),
        StepStarted(at=1, thread_id=th, turn_id=t, step_id=i, step_kind="inference"),
        TextDelta(at=1, thread_id=th, turn_id=t, text="ab"),
        StepFinished(
            at=2,
            thread_id=th,
            turn_id=t,
            step_id=i,
            step_kind="inference",
            status="succeeded",
            summary="ok",
            duration=1.0,
        ),
        CallChanged(
            at=2,
            thread_id=th,
            turn_id=t,
            call_id=f"c_{i}",
            tool="shell",
            args={"command": "ls"},
            status="suspended",
            error="needs approval",
        ),
    ]


def test_fold_tracks_steps_calls_and_pending() -> None:
    s = DeckState()
    ch = s.fold(_turn(1))
    assert ch.steps and ch.pending and ch.new_pending == 1 and ch.threads == {"chat:1"}
    assert [(r.kind, r.status, r.summary) for r in s.steps] == [("inference", "succeeded", "ok")]
    assert s.thread("chat:1").streaming == "ab"
    assert list(s.pending) == ["c_1"] and s.calls_of("t_1")[0].tool == "shell"
    ch = s.fold([
        CallChanged(at=3, thread_id="chat:1", turn_id="t_1", call_id="c_1", tool="shell",
                    args={}, status="resuming"),
        TurnChanged(at=3, thread_id="chat:1", turn_id="t_1", status="done", reason="natural"),
    ])  # fmt: skip
    assert ch.pending and not s.pending and ch.new_pending == 0
    assert s.thread("chat:1").streaming == "" and s.counts() == (0, 0)


def test_a_refused_decision_leaves_its_call_decidable_again() -> None:
    s = DeckState()
    s.fold(_turn(1))
    s.mark_decided("c_1", "resume")  # the console sent an approval
    recorded = dict(at=3, thread_id="chat:1", turn_id="t_1", decision_id="d_1", call_id="c_1",
                    action="resume")  # fmt: skip
    ch = s.fold([DecisionRecorded(**recorded, status="queued")])
    assert s.decided == {"c_1": "resume"} and ch.pending
    # the engine refused it (its arguments were not those shown): nothing ran, it waits
    ch = s.fold([DecisionRecorded(**recorded, status="refused", note="hash differs")])
    assert s.decided == {} and ch.pending and list(s.pending) == ["c_1"]


def _sample(kind: type) -> object:
    """An event of `kind` with a plain value in every field it requires (a status: the
    first of its enum, or of its literals)."""
    plain = {str: "x", int: 1, float: 1.0}
    return kind(**{name: next(iter(f.annotation)) if _is_enum(f.annotation)
                   else get_args(f.annotation)[0] if get_origin(f.annotation) is Literal
                   else plain.get(f.annotation, None)
                   for name, f in kind.model_fields.items() if f.is_required()})  # fmt: skip


def _is_enum(annotation: object) -> bool:
    return isinstance(annotation, type) and issubclass(annotation, Enum)


def test_fold_takes_every_kind_of_the_engines_events_and_fails_loudly_on_others() -> None:
    """The fold matches every kind of `engine.domain.events.Event`, and one it does not know (a
    kind the engine added, not folded yet) is an error, never dropped silently."""
    [union, _] = get_args(Event)  # Annotated[A | B | ..., Discriminator("kind")]
    kinds = get_args(union)
    assert len(kinds) >= 9
    s = DeckState()
    ch = s.fold([_sample(kind) for kind in kinds])  # type: ignore[misc]
    assert ch.events == len(kinds) and s.events_folded == len(kinds)

    class Surprise(NamedTuple):
        kind: str = "surprise"

    with pytest.raises(AssertionError, match="surprise"):
        s.fold([Surprise()])  # type: ignore[list-item]


def test_the_thread_list_is_most_recently_used_first() -> None:
    s = DeckState()
    for thread in ("chat:c", "chat:b", "chat:a"):  # the room's, as the seed notes them
        s.note_thread(thread)
    assert s.recent_threads == ["chat:a", "chat:b", "chat:c"]
    s.fold(_turn(2))  # a turn starts on a thread not seen before: it comes first
    assert s.recent_threads == ["chat:2", "chat:a", "chat:b", "chat:c"]
    s.note_thread("chat:c")  # opened again: first, and listed once
    assert s.recent_threads == ["chat:c", "chat:2", "chat:a", "chat:b"]
    s.fold(_turn(5))  # chat:2 runs again
    assert s.recent_threads == ["chat:2", "chat:c", "chat:a", "chat:b"]
    s.clear()  # events were missed: the room's threads are read again
    assert s.recent_threads == []


def test_state_is_bounded(monkeypatch) -> None:
    monkeypatch.setattr(state_mod, "MAX_TURNS", 50)
    s = DeckState()
    for i in range(state_mod.MAX_STEPS + 500):
        s.fold(_turn(i))
        s.fold([TurnChanged(at=3, thread_id="x", turn_id=f"t_{i}", status="done")])
    assert len(s.steps) == state_mod.MAX_STEPS
    assert s.sizes()["step index"] == state_mod.MAX_STEPS
    assert len(s.turns) <= 50 and len(s.calls) <= 50 + 1


def test_what_runs_is_known_without_looking_through_the_turns_that_are_done() -> None:
    """The thread's active turn and the oldest running one come from the turns that are
    not done (kept as their statuses change), and agree with a look through all of them."""
    from console.state import TurnRow
    from engine.lifecycle import TurnStatus

    s = DeckState()
    for i in range(1, 7):
        s.fold([TurnStarted(at=i, thread_id=f"chat:{i % 2}", turn_id=f"t_{i}", origin="chat",
                            sender="operator", text="x")])  # fmt: skip
    assert s.active_turn("chat:0").turn_id == "t_6" and s.active_turn("chat:1").turn_id == "t_5"
    s.fold([TurnChanged(at=7, thread_id="chat:0", turn_id="t_6", status="done"),
            TurnChanged(at=7, thread_id="chat:1", turn_id="t_1", status="waiting")])  # fmt: skip
    assert s.active_turn("chat:0").turn_id == "t_4"
    assert s.oldest_running().turn_id == "t_2"  # t_1 waits
    for i in (2, 4):
        s.fold([TurnChanged(at=8, thread_id="chat:0", turn_id=f"t_{i}", status="done")])
    assert s.active_turn("chat:0") is None and s.active_turn("nobody") is None
    # a read from the room older than an event says a done turn is running: in its place
    s.add_turn(TurnRow("t_2", "chat:0", TurnStatus.RUNNING, started_at=2))
    assert s.active_turn("chat:0").turn_id == "t_2" and s.oldest_running().turn_id == "t_2"

    def scanned(thread_id: str) -> TurnRow | None:
        done = TurnStatus.DONE
        return next((t for t in reversed(s.turns.values())
                     if t.thread_id == thread_id and t.status != done), None)  # fmt: skip

    for thread_id in ("chat:0", "chat:1"):
        assert s.active_turn(thread_id) is scanned(thread_id)


class _Target:
    def __init__(self) -> None:
        self.posted: list = []

    def post_message(self, message) -> bool:
        self.posted.append(message)
        return True


def test_bridge_posts_one_message_per_frame() -> None:
    bridge = Bridge()
    target = _Target()
    bridge.target = target  # type: ignore[assignment]
    for i in range(1_000):
        for event in _turn(i):
            bridge.receive(event)
    assert target.posted == [] and bridge.backlog == 5_000
    bridge.flush()
    assert len(target.posted) == 1 and bridge.backlog == 0
    assert bridge.state.events_folded == 5_000
    assert bridge.flush() is None and len(target.posted) == 1  # an empty frame posts nothing


def test_bridge_spreads_a_burst_but_never_falls_behind() -> None:
    bridge = Bridge()
    bridge.target = _Target()  # type: ignore[assignment]
    for i in range(4_000):  # a burst of 20,000 events in one frame
        for event in _turn(i):
            bridge.receive(event)
    bridge.flush(budget=0)
    assert 0 < bridge.backlog < 20_000  # part of it waits for later frames
    backlogs = []
    for i in range(4_000, 4_400):  # then 50 events a frame
        for event in _turn(i) * 2:
            bridge.receive(event)
        bridge.flush(budget=0)
        backlogs.append(bridge.backlog)
    assert backlogs == sorted(backlogs, reverse=True) and backlogs[-1] == 0
    assert bridge.state.events_folded == 20_000 + 400 * 10


class _Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def _paced() -> tuple[Bridge, _Target, _Clock]:
    clock = _Clock()
    bridge = Bridge(clock=clock)
    target = _Target()
    bridge.target = target  # type: ignore[assignment]
    return bridge, target, clock


def test_in_a_flood_the_bridge_draws_one_side_a_frame_then_catches_up() -> None:
    bridge, target, clock = _paced()

    def flood() -> None:  # a frame of 1,000 events: steps, chat:0..2, turns t_0..t_199
        for i in range(200):
            for event in _turn(i):
                bridge.receive(event)
        bridge.flush()

    flood()
    ch, due = bridge.take("chat:1", "t_1")
    assert ch.events == 1_000 and due == {"timeline", "calls", "status"}  # the right side
    flood()
    assert bridge.take("chat:1", "t_1")[1] == {"chat"}  # then the chat; the status waits
    clock.now += 0.2
    flood()
    assert bridge.take("chat:1", "t_1")[1] == {"timeline", "calls"}  # the status waits
    clock.now += 0.3
    flood()
    assert bridge.take("chat:1", "t_1")[1] == {"chat", "status"}  # STATUS_EVERY later
    flood()  # another thread and turn shown: the right side, with what the last frame left
    assert bridge.take("chat:9", "t_9999")[1] == {"timeline", "calls"}
    for event in _turn(1):  # the flood's last frame caught only a few events: still paced
        bridge.receive(event)
    bridge.flush()
    assert bridge.take("chat:1", "t_1")[1] == {"chat"}
    # The flood is over; what it left is drawn once no events came for CATCH_UP seconds,
    # not before.
    posted = len(target.posted)
    clock.now += 0.05
    bridge.tick()
    assert len(target.posted) == posted
    clock.now += 0.15
    bridge.tick()
    assert len(target.posted) == posted + 1
    ch, due = bridge.take("chat:1", "t_1")
    assert ch.events == 0 and due == {"timeline", "calls", "status"}  # all it left
    bridge.tick()
    assert len(target.posted) == posted + 1  # nothing left to draw: nothing posted


def test_a_key_asks_for_a_pane_and_the_next_frame_draws_it() -> None:
    bridge, target, _ = _paced()
    bridge.tick()
    assert target.posted == []  # nothing due
    for _ in range(5):  # keys faster than frames
        bridge.want("calls")
    assert target.posted == []  # not once per key
    bridge.tick()
    assert len(target.posted) == 1
    ch, due = bridge.take("chat:1", "t_1")
    assert ch.events == 0 and due == {"calls"}
    bridge.tick()
    assert len(target.posted) == 1
    # In a flood, the pane a key asked for waits for its side's frame like the others.
    for i in range(200):
        for event in _turn(i):
            bridge.receive(event)
    bridge.flush()
    assert bridge.take("chat:1", "t_1")[1] == {"timeline", "calls", "status"}
    bridge.want("calls")
    bridge.tick()  # no events: posted for the key
    assert len(target.posted) == 3
    assert bridge.take("chat:1", "t_1")[1] == {"chat"}  # the chat's turn; the calls wait


def test_a_call_read_from_the_room_does_not_undo_a_newer_event() -> None:
    """Found by CI: the console follows events before it reads the room, so a call's event
    can be folded before a read made earlier lands; the read (the call `running`) replaced
    the event's (suspended for review): the queue showed one, the state the other."""
    from console.state import CallRow
    from engine.domain.events import CallChanged
    from engine.lifecycle import CallStatus

    state = DeckState()
    state.fold([CallChanged(at=10.0, thread_id="a", turn_id="t", call_id="c", tool="shell",
                            status=CallStatus.SUSPENDED, awaiting="review")])  # fmt: skip
    state.add_call(CallRow("c", "t", "a", "shell", {}, CallStatus.RUNNING, updated_at=5.0))
    assert state.calls["c"].status == CallStatus.SUSPENDED and state.calls["c"].under_review
    assert state.pending["c"] is state.calls["c"]
    state.add_call(CallRow("c", "t", "a", "shell", {}, CallStatus.SUCCEEDED, updated_at=20.0))
    assert state.calls["c"].status == CallStatus.SUCCEEDED and "c" not in state.pending
