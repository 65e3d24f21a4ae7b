"""Two turns compared, read from the room's history (issue 37).

The turns are read by the history reader (engine/api/history.py: its own read-only
connection, or a read-only session on PostgreSQL), so a diff reads the same from the
room's owner (`LocalClient.diff`, `GET /v1/diff`), from a room nobody owns (`RoomReader`,
`agentdeck diff`) and while another process owns the room. The comparison itself is
engine/domain/turn_diff.py.
"""

from __future__ import annotations

import anyio

from engine.domain.turn_diff import TurnDiff, diff_turns
from engine.room import Room


async def read_diff(room: Room, turn_a: str, turn_b: str) -> TurnDiff:
    """Turn `turn_a` (A) and `turn_b` (B) of `room` compared; NotFound names a turn the
    room does not have."""
    from engine.api.client import NotFound
    from engine.api.history import History, UnknownTurn

    async with History(room) as history:
        try:
            a = await history.turn(turn_a)
            b = await history.turn(turn_b)
        except UnknownTurn as exc:
            raise NotFound(str(exc)) from None
    # Aligning is CPU work (a few ms for a turn of 100 calls, seconds for thousands): in a
    # worker thread, so the owner's event loop (its turns, its API) goes on meanwhile.
    return await anyio.to_thread.run_sync(diff_turns, a, b)
