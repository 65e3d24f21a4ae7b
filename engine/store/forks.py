"""Forks and replays in execution.db (engine/services/forking.py): what a new thread is
made from (a step of a turn, or the record before a turn), and the record it copies."""

from __future__ import annotations

import json
from typing import Any

from engine.store.base import Op, Store, json_or_text


def made(thread_id: str, kind: str, from_thread: str, from_turn: str, from_step: int | None,
         upto: int, edited: dict[int, str], group: str, by: str, at: float) -> Op:  # fmt: skip
    return ("forks.made", (thread_id, kind, from_thread, from_turn, from_step, upto,
                           json.dumps({str(k): v for k, v in edited.items()}), group, by, at))  # fmt: skip


def copied(thread_id: str, marker: str, seq: int, role: str, text: str, body: str,
           at: float) -> Op:  # fmt: skip
    """An entry of the record, copied into the new thread (`marker`: the turn id its copies
    are written under: no turn of either thread)."""
    return ("turns.message_appended", (thread_id, marker, seq, role, text, body, at))


async def step_cut(store: Store, turn_id: str, step_id: int) -> tuple[str, int, str] | None:
    """(thread, how many of its entries there were when the step ended, the step's kind)
    for step `step_id` of turn `turn_id`; None when the turn has no such step. A step of a
    room before forks is cut by time: the entries written up to its end."""
    row = await store.fetchone("forks.step", (step_id, turn_id))
    if row is None:
        return None
    upto = row["conv_upto"]
    if upto is None:
        upto = int(await store.scalar("forks.entries_until", (row["thread_id"], row["ended_at"])))
    return row["thread_id"], int(upto), row["kind"]


async def turn_start(store: Store, turn_id: str) -> int | None:
    """The first entry a turn appended (its message): where a replay of it cuts."""
    value = await store.scalar("forks.turn_start", (turn_id,))
    return None if value is None else int(value)


async def bodies(store: Store, thread_id: str, upto: int) -> list[str]:
    """The thread's entries [0, upto), each a ConvMessage's JSON."""
    return [r["body"] for r in await store.fetchall("forks.bodies", (thread_id, upto))]


async def turn_calls(store: Store, turn_id: str) -> list[dict[str, Any]]:
    """A turn's calls as a replay reads the record (pauses left out), in their order."""
    return [
        {"tool": r["tool"], "args": json_or_text(r["args"]), "status": r["status"],
         "result": r["result"], "error": r["error"]}
        for r in await store.fetchall("forks.turn_calls", (turn_id,))
    ]  # fmt: skip


async def of_thread(store: Store, thread_id: str) -> Any:
    return await store.fetchone("forks.of_thread", (thread_id,))


async def from_thread(store: Store, thread_id: str) -> list[Any]:
    return await store.fetchall("forks.from_thread", (thread_id,))
