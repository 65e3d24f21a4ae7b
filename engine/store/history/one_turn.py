"""One turn of a room's history, read whole in one snapshot (`History.turn`): its row, its
steps, messages, calls and decisions, and what else the room records of it
(records.py): what it was told, the model that answered it, what it spent, whether
retention pruned it, where its thread came from and the threads made from it."""

from __future__ import annotations

import os
import sqlite3
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import aiosqlite
import anyio

from engine.room import Room
from engine.store.history.filters import UnknownTurn
from engine.store.history.lineage import origin_item
from engine.store.history.rows import turn_detail, write_json
from engine.store.sql import Dialect

# A turn's parts, each read by the turn's id: steps, messages, calls, decisions; and what
# it was told, the model that answered it and what it spent, where its thread came from and
# the threads made from it, in a room whose turns record them (records.py).
_TURN_PARTS = ("history.steps", "history.messages", "history.calls", "history.turn_decisions")
_TOLD_PART = "history.turn_instructions"
_MODEL_PART = "history.turn_model"
_USAGE_PART = "history.turn_usage"
_PRUNED_PART = "history.turn_pruned"
_ORIGIN_PARTS = ("history.turn_origin", "history.turn_forks")


class TurnReads:
    """`History`'s reads of one turn (its connection and what the room records are
    History's)."""

    room: Room
    d: Dialect
    _db: aiosqlite.Connection | None
    _pg: Any
    told: bool
    modelled: bool
    priced: bool
    pruned: bool
    forked: bool

    @property
    def where(self) -> str:
        """What the history reads: the room's execution.db, or its PostgreSQL database."""
        return self._pg.path if self._pg is not None else str(self.room.db)

    async def turn(self, turn_id: str) -> dict[str, Any]:
        """The turn with its steps, messages, tool calls and decisions (one snapshot)."""
        if self._pg is not None:
            return await self._pg_turn(turn_id)
        if self._db is None:
            raise UnknownTurn(f"no turn {turn_id}: {self.room.db} does not exist")

        gone = threading.Event()  # the caller stopped waiting: a queued read is skipped
        parts = self._turn_parts

        def read(conn: sqlite3.Connection) -> tuple[Any, ...] | None:
            # One hop to the connection's thread: BEGIN..COMMIT run together, so no
            # cancel can leave the read transaction open between them.
            if gone.is_set():
                return None
            conn.execute("BEGIN")
            try:
                row = conn.execute(self.d.text("history.turn"), (turn_id,)).fetchone()
                if row is None:
                    return None
                return (row, *(conn.execute(self.d.text(name), (turn_id,)).fetchall()
                               for name in parts))  # fmt: skip
            finally:
                conn.execute("COMMIT")

        db = self._db
        try:
            found = await db._execute(lambda: read(db._conn))  # noqa: SLF001 - see Store.write
        finally:
            # Cancelled (the console cancels the read of a turn the cursor has left): the
            # read still waiting behind others on the connection's thread never begins, so
            # a fast cursor queues no work; one already running ends, COMMIT included.
            gone.set()
        if found is None:
            raise UnknownTurn(f"no turn {turn_id} in {self.room.db}")
        return self._detail(found[0], found[1:])

    @property
    def _turn_parts(self) -> tuple[str, ...]:
        return (*_TURN_PARTS, *((_TOLD_PART,) if self.told else ()),
                *((_MODEL_PART,) if self.modelled else ()),
                *((_USAGE_PART,) if self.priced else ()),
                *((_PRUNED_PART,) if self.pruned else ()),
                *(_ORIGIN_PARTS if self.forked else ()))  # fmt: skip

    def _detail(self, row: sqlite3.Row, parts: Sequence[list[sqlite3.Row]]) -> dict[str, Any]:
        """The turn's detail from its row and the rows of `_turn_parts`, in their order."""
        by_name = dict(zip(self._turn_parts, parts, strict=True))
        steps, messages, calls, decisions = (by_name[name] for name in _TURN_PARTS)
        told, model = by_name.get(_TOLD_PART), by_name.get(_MODEL_PART)
        detail = turn_detail(row, steps, messages, calls, decisions, told=told, model=model,
                             usage=by_name.get(_USAGE_PART),
                             pruned=by_name.get(_PRUNED_PART))  # fmt: skip
        origin, forks = (by_name.get(name) or [] for name in _ORIGIN_PARTS)
        detail["origin"] = origin_item(origin[0]) if origin else None
        detail["forks"] = [origin_item(f) for f in forks]
        return detail

    async def _pg_turn(self, turn_id: str) -> dict[str, Any]:
        found = await self._pg.snapshot(
            [(self.d.text(name), (turn_id,)) for name in ("history.turn", *self._turn_parts)]
        )
        if not found[0]:
            raise UnknownTurn(f"no turn {turn_id} in {self.where}")
        return self._detail(found[0][0], found[1:])

    async def where_suspended(self, turn_id: str) -> dict[str, Any] | None:
        """The step and calls where the turn suspended (still waiting first); None if it
        never did."""
        return (await self.turn(turn_id))["suspended"]

    async def export_turn(self, turn_id: str, path: str | os.PathLike[str] | None = None) -> Path:
        """Write the turn as JSON (default: `exports/turn-<id>.json` in the room)."""
        detail = await self.turn(turn_id)
        doc = {"format": "agentdeck.turn/1", "exported_at": time.time(),
               "room": str(self.room.path), **detail}  # fmt: skip
        target = (
            Path(path) if path is not None else self.room.path / "exports" / f"turn-{turn_id}.json"
        )
        await anyio.to_thread.run_sync(write_json, target, doc)
        return target
