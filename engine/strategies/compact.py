"""`compact` and `uncompact`: an operator's compaction of a thread, now, or the undoing of
its last one (`agentdeck compact THREAD [--undo]`, the console). Each is a turn of its own
on the thread, so the scheduler serialises it with the thread's other turns, and its marker
is written in a checkpoint like any entry (engine/turn/compaction.py)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from engine.lifecycle import turn as turn_lifecycle
from engine.turn import compaction

if TYPE_CHECKING:
    from engine.turn.loop import TurnLoop


async def compact(loop: TurnLoop) -> None:
    made = await compaction.fit(loop, force=True)
    loop.turn.final_text = "compacted" if made else "nothing to compact"
    await loop.finish(turn_lifecycle.NATURAL)


async def uncompact(loop: TurnLoop) -> None:
    undone = await compaction.undo(loop)
    loop.turn.final_text = "the last compaction undone" if undone else "no compaction to undo"
    await loop.finish(turn_lifecycle.NATURAL)
