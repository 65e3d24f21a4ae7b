"""The history browser says what retention pruned (issue 35): a pruned turn's line ends
with when its steps were pruned, and its pane says so in place of its step count, with
its calls and decisions as they were."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from console.history.view import notes, turn_cells
from engine.api.history import History
from engine.room import Room
from engine.services.retention import Retention
from tests.helpers import msg, runtime
from tests.test_retention import DAY, T0, Clock, calls_then_answers

pytestmark = pytest.mark.anyio


def text(cells: tuple[tuple[str, str], ...]) -> str:
    return "".join(part for part, _ in cells)


async def test_a_pruned_turn_says_so_in_the_list_and_its_pane(tmp_path: Path) -> None:
    clock = Clock()
    async with runtime(tmp_path, calls_then_answers, clock=clock) as rt:
        old = (await rt.run_turn(msg("old", "old"))).turn_id
        clock.now = T0 + 40 * DAY
        new = (await rt.run_turn(msg("new", "new"))).turn_id
        await Retention.of(rt.store, rt.room.path, rt.config, rt.clock).gc(days=30)
    async with History(Room.at(tmp_path / "room")) as history:
        listed = {t["turn_id"]: t for t in (await history.turns()).items}
        pruned, kept = await history.turn(old), await history.turn(new)
    day = time.strftime("%Y-%m-%d", time.localtime(T0 + 40 * DAY))
    assert text(turn_cells(listed[old])).endswith(f"old  · steps pruned {day}")
    assert "pruned" not in text(turn_cells(listed[new]))
    facts = text(notes(pruned)[1])
    assert f"· steps pruned {day} (3 steps: results and events went) · 1 call" in facts
    assert text(notes(kept)[1]).endswith("· 3 steps · 1 call")
