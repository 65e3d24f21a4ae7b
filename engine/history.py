"""Reading execution.db without owning the room: a read-only connection per query."""

from __future__ import annotations

import sqlite3
from typing import Any

import aiosqlite

from engine.room import Room


async def connect_readonly(room: Room) -> aiosqlite.Connection:
    """A read-only connection that never blocks the room's owner (WAL readers don't)."""
    db = await aiosqlite.connect(f"file:{room.db}?mode=ro", uri=True)
    db.row_factory = sqlite3.Row
    await db.execute("PRAGMA busy_timeout=2000")
    return db


async def recent_turns(
    room: Room, *, thread: str | None = None, limit: int = 20
) -> list[dict[str, Any]]:
    """Turns, newest first, with their call counts."""
    if not room.db.exists():
        return []
    db = await connect_readonly(room)
    try:
        where, params = ("WHERE t.thread_id = ?", [thread]) if thread else ("", [])
        rows = await db.execute_fetchall(
            "SELECT t.id, t.thread_id, t.origin, t.status, t.reason, t.text, t.final_text,"
            " t.created_at, t.ended_at,"
            " (SELECT count(*) FROM tool_calls c WHERE c.turn_id = t.id) AS calls"
            f" FROM turns t {where} ORDER BY t.created_at DESC, t.id DESC LIMIT ?",
            (*params, limit),
        )
    finally:
        await db.close()
    return [
        {
            "turn_id": r["id"], "thread_id": r["thread_id"], "origin": r["origin"],
            "status": r["status"], "reason": r["reason"], "text": r["text"],
            "answer": r["final_text"] or "", "created_at": r["created_at"],
            "ended_at": r["ended_at"], "calls": r["calls"],
        }
        for r in rows
    ]  # fmt: skip
