"""A thread's group as the runtime says it: the state keeps it on turns and steps, the
timeline's group filter uses it, and only rows that have none are placed by thread id."""

from __future__ import annotations

from pathlib import Path

import pytest

from console.groups import group_of
from console.state import DeckState
from console.widgets.timeline import Timeline
from engine.domain.events import StepStarted, TurnChanged, TurnStarted
from engine.domain.messages import Message
from engine.providers.offline import OfflineModel
from tests.console.conftest import build
from tests.console.helpers import SIZE, started, until
from tests.helpers import runtime


def ops(thread_id: str, text: str) -> Message:
    """A chat message whose thread the scheduler puts in group `task` (by `meta.group`),
    which its thread id does not say."""
    return Message(origin="chat", channel="console", sender="operator", thread_id=thread_id,
                   text=text, meta={"group": "task"})  # fmt: skip


def test_the_state_keeps_the_group_the_events_name() -> None:
    s = DeckState()
    s.fold([
        TurnStarted(at=1, thread_id="desk", turn_id="t_1", origin="chat", sender="op",
                    text="x", group="task"),
        StepStarted(at=1, thread_id="desk", turn_id="t_1", step_id=1, step_kind="inference"),
        # a turn first seen changing (it was resumed) takes the group its event names
        TurnChanged(at=2, thread_id="bench", turn_id="t_2", status="running", group="chore"),
        StepStarted(at=2, thread_id="bench", turn_id="t_2", step_id=2, step_kind="replay"),
        # a step of a turn this state never saw has no group: its thread id places it
        StepStarted(at=3, thread_id="will:x", turn_id="t_3", step_id=3, step_kind="inference"),
    ])  # fmt: skip
    assert (s.turns["t_1"].group, s.turns["t_2"].group) == ("task", "chore")
    assert [(r.thread_id, r.group) for r in s.steps] == [
        ("desk", "task"), ("bench", "chore"), ("will:x", None),
    ]  # fmt: skip
    assert [group_of(r.thread_id, r.group) for r in s.steps] == ["task", "chore", "will"]
    # a TurnChanged stored before events named the group leaves the known one alone
    s.fold([TurnChanged(at=4, thread_id="desk", turn_id="t_1", status="done")])
    assert s.turns["t_1"].group == "task"


@pytest.mark.anyio
async def test_the_group_filter_uses_the_runtimes_group_live_and_seeded(
    tmp_path: Path, room: Path
) -> None:
    async with runtime(tmp_path, OfflineModel(delay=0)) as rt:  # history: room is tmp_path/room
        assert rt.room.path == room
        await rt.run_turn(ops("desk", "hello"))
    app = build(room)
    async with app.run_test(size=SIZE) as pilot:
        main = await started(pilot)
        timeline = main.query_one(Timeline)
        seeded = [r for r in main.state.steps if r.thread_id == "desk"]
        assert seeded and {r.group for r in seeded} == {"task"}  # from the room's threads
        await app.host.runtime.submit(ops("bench", "hello"))
        await until(pilot, lambda: any(r.thread_id == "bench" for r in main.state.steps),
                    "the live turn's step")  # fmt: skip
        main.filters.group("task")
        await pilot.pause()
        assert {r.thread_id for r in timeline.rows} == {"desk", "bench"}
        main.filters.group("chat")  # what the thread ids alone would have said
        await pilot.pause()
        assert not {r.thread_id for r in timeline.rows} & {"desk", "bench"}
        await app.shutdown()
