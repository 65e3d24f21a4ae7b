"""The console speaks the engine's status vocabulary: its rows hold the lifecycle enums, the
fold asks `CallStatus.terminal` instead of keeping its own list, every state has a look,
and the timeline's ring still holds plain words (tuples the GC does not track)."""

from __future__ import annotations

import gc

import pytest

from console.glyphs import look
from console.seed import seed
from console.state import DeckState
from console.threads import turn_note
from engine.api.tool_models import ToolsView
from engine.api.usage_models import BudgetsView, Spend
from engine.domain.events import CallChanged, StepFinished, StepStarted, TurnChanged, TurnStarted
from engine.lifecycle import CallStatus, StepStatus, TurnStatus
from engine.lifecycle import turn as turn_lifecycle
from engine.store.recent import Recent, read_recent
from tests.helpers import msg, runtime
from tests.scripted import first_then

UNKNOWN = "?"  # the glyph of a word the console has no look for


@pytest.mark.parametrize("status", [*TurnStatus, *CallStatus, *StepStatus], ids=str)
def test_every_engine_status_has_a_look_of_its_own(status: str) -> None:
    shown = look(status)
    assert shown.glyph != UNKNOWN and shown.word == status.value
    assert look(status.value) == shown  # the stored word finds the same look


def test_a_done_turn_is_drawn_by_how_it_ended() -> None:
    assert look(TurnStatus.DONE, turn_lifecycle.NATURAL).word == "done"
    assert look(TurnStatus.DONE, turn_lifecycle.CANCELLED) == look(CallStatus.CANCELLED)
    assert look(TurnStatus.DONE, turn_lifecycle.stopped("max_rounds")).word == "max_rounds"
    assert look(TurnStatus.WAITING, turn_lifecycle.SUSPENDED).word == "waiting"
    assert turn_note(turn_lifecycle.ERROR, "boom") == "turn failed: boom"
    assert turn_note(turn_lifecycle.BEHAVIOR_REQUESTED, None) is None
    assert look(TurnStatus.DONE, turn_lifecycle.BUDGET).word == "budget"
    assert turn_note(turn_lifecycle.BUDGET, "the turn's budget: 3k of 2k tokens") == (
        "stopped by a budget: the turn's budget: 3k of 2k tokens"
    )


def _call(status: CallStatus, at: float) -> CallChanged:
    return CallChanged(at=at, thread_id="th", turn_id="t_1", call_id="c_1", tool="shell",
                       status=status)  # fmt: skip


@pytest.mark.parametrize("status", list(CallStatus), ids=str)
def test_a_call_ends_exactly_when_its_status_is_terminal(status: CallStatus) -> None:
    s = DeckState()
    s.fold([_call(CallStatus.NEW, 1.0), _call(status, 2.0)])
    call = s.calls["c_1"]
    assert call.status is status
    assert call.ended_at == (2.0 if status.terminal else None)
    assert ("c_1" in s.pending) is (status is CallStatus.SUSPENDED)


def test_turn_rows_hold_the_enum_and_are_counted_by_it() -> None:
    s = DeckState()
    s.fold([
        TurnStarted(at=1, thread_id="a", turn_id="t_1", origin="chat", sender="op", text="x"),
        TurnStarted(at=1, thread_id="b", turn_id="t_2", origin="chat", sender="op", text="x"),
        TurnChanged(at=2, thread_id="b", turn_id="t_2", status="waiting", reason="suspended"),
    ])  # fmt: skip
    assert s.turns["t_1"].status is TurnStatus.RUNNING
    assert s.turns["t_2"].status is TurnStatus.WAITING
    assert s.counts() == (1, 1)
    assert s.active_turn("b") is s.turns["t_2"]
    s.fold([TurnChanged(at=3, thread_id="b", turn_id="t_2", status="done", reason="natural")])
    assert s.counts() == (1, 0) and s.active_turn("b") is None


def test_the_step_ring_holds_plain_words_untracked_by_the_gc() -> None:
    s = DeckState()
    s.fold([
        StepStarted(at=1, thread_id="a", turn_id="t_1", step_id=1, step_kind="inference"),
        StepFinished(at=2, thread_id="a", turn_id="t_1", step_id=1, step_kind="inference",
                     status=StepStatus.FAILED, summary="boom"),
        StepStarted(at=3, thread_id="a", turn_id="t_1", step_id=2, step_kind="inference"),
    ])  # fmt: skip
    s.add_step(s.steps[0]._replace(step_id=3))  # as seeding adds a stored step
    assert [r.status for r in s.steps] == ["failed", "running", "failed"]
    # exact strings: a ring row holding an enum member (an object with a __dict__) would
    # be a tuple the cyclic GC tracks, which the ring exists to avoid
    assert {type(r.status) for r in s.steps} == {str}
    assert not any(gc.is_tracked(v) for r in s.steps for v in r)


@pytest.mark.anyio
async def test_seeded_rows_hold_the_enums_the_room_read_gives(tmp_path) -> None:
    async with runtime(tmp_path, first_then([("shell", {"command": "ls"})])) as rt:
        await rt.run_turn(msg("go"))
        room = rt.room
    recent = await read_recent(room)
    assert [type(t.status) for t in recent.turns] == [TurnStatus]
    assert {type(c.status) for c in recent.calls} == {CallStatus}
    assert {type(st.status) for st in recent.steps} == {StepStatus}

    class Client:
        async def recent(self) -> Recent:
            return recent

        async def pending(self) -> list:  # (seed reads the deadlines from it)
            return []

        async def budgets(self) -> BudgetsView:  # (and today's spend from these)
            return BudgetsView(day="2026-01-01", today=Spend(), budgets=[], held=[])

        async def tools(self) -> ToolsView:  # (and the sandbox from these)
            return ToolsView(tools=[], servers=[], sandbox="off (agentdeck.toml)")

    s = DeckState()
    await seed(Client(), s)  # type: ignore[arg-type]
    [turn] = s.turns.values()
    assert turn.status is TurnStatus.WAITING and s.counts() == (0, 1)
    assert [c.status for c in s.calls.values()] == [CallStatus.SUSPENDED]
    assert list(s.pending) == [c.call_id for c in recent.calls]
    assert {type(r.status) for r in s.steps} == {str}  # plain words in the ring
