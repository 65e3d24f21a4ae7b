"""Runs, turns, steps, tool calls, messages, checkpoints and events in execution.db: the
named writes a turn's checkpoints are made of, and the reads that load a turn again.

Writes are `Op`s (a statement's name, engine/store/sql/*/turns.sql, and its parameters)
gathered into one checkpoint's transaction by the caller; reads take the store. Nothing
outside `engine/store/` writes SQL.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from engine.domain.events import Event, event_json
from engine.domain.messages import Message
from engine.domain.usage import Usage
from engine.store.sqlite import Op, Store

if TYPE_CHECKING:
    from engine.store.reader import Reads

# -- runs -------------------------------------------------------------------------------------


def run_started(run_id: str, kind: str, pid: int, at: float, alone: bool = True) -> list[Op]:
    """A run begins; `alone` (no other worker shares the store), one a dead process left
    `active` is marked crashed."""
    crashed = ("turns.runs_crashed", (at,))
    return [
        *([crashed] if alone else []),
        ("turns.run_started",
         (run_id, kind, pid, at)),
    ]  # fmt: skip


def cancel_asked(turn_id: str, reason: str, at: float) -> Op:
    """A cancel of the turn, recorded (the first one asked stands)."""
    return ("turns.cancel_asked",
            (turn_id, reason, at))  # fmt: skip


async def asked_cancel(store: Store, turn_id: str) -> str | None:
    """The reason of a cancel recorded for the turn (None: none was asked)."""
    row = await store.fetchone("turns.asked_cancel", (turn_id,))
    return None if row is None else str(row[0])


def run_ended(run_id: str, at: float) -> Op:
    return ("turns.run_ended", (at, run_id))


async def last_step_id(store: Store) -> int:
    return int(await store.scalar("turns.last_step_id"))


# -- turns ------------------------------------------------------------------------------------


def turn_opened(turn_id: str, message: Message, group: str, strategy: str, run_id: str,
                at: float, instructions: str | None = None,
                model: str | None = None) -> list[Op]:  # fmt: skip
    """A request becomes a turn: the request admitted, its thread noted, the turn row
    (with the hash of its `instructions`, None: none, and its `model`)."""
    return [
        ("turns.request_admitted", (at, turn_id)),
        ("turns.thread_noted",
         (message.thread_id, group, at, at, turn_id)),
        ("turns.turn_opened",
         (turn_id, message.thread_id, run_id, message.origin, message.channel,
          message.sender, message.text, json.dumps(message.meta), strategy, "running", at, at,
          instructions or None, model)),
    ]  # fmt: skip


def instructions_kept(hash_: str, text: str, parts: str, at: float) -> Op:
    """A text of instructions, stored once (its hash is its key)."""
    return ("turns.instructions_kept", (hash_, text, parts, at))


async def instructions_of(store: Store, hash_: str) -> Any:
    """(text, parts) of the instructions stored under `hash_` (None: none)."""
    return await store.fetchone("turns.instructions_of", (hash_,))


async def thread_instructions(store: Store, thread_id: str) -> Any:
    """(the thread's own instructions as an operator set them, its group); None: no such
    thread yet."""
    return await store.fetchone("turns.thread_instructions", (thread_id,))


def thread_instructions_set(thread_id: str, group: str, text: str | None, at: float) -> Op:
    return ("turns.thread_instructions_set", (thread_id, group, at, at, text))


def turn_changed(turn_id: str, fields: Sequence[Any], at: float, done: bool) -> Op:
    """What a turn's loop changes: status, reason, detail, rounds, tokens (in, out,
    cached), cost, unpriced tokens, final text and strategy record, in that order."""
    return (
        "turns.turn_changed",
        (*fields, at, at if done else None, turn_id),
    )


async def turn_row(store: Store, turn_id: str) -> Any:
    """A turn's row with its thread's group (None when there is no such turn)."""
    return await store.fetchone(
        "turns.turn_row", (turn_id,)
    )  # fmt: skip


# -- steps, calls, messages -------------------------------------------------------------------


def step_ended(step_id: int, turn_id: str, run_id: str, idx: int, kind: str, status: str,
               summary: str, started: float, ended: float,
               usage: Usage | None = None, conv_upto: int | None = None) -> Op:  # fmt: skip
    """A step's row, with what it spent (an inference's tokens and their cost: None, no
    price; a step that spent nothing has no cost) and how many entries its thread's
    conversation had when it ended (where a fork of it cuts)."""
    u = usage or Usage()
    return (
        "turns.step_ended",
        (step_id, turn_id, run_id, idx, kind, status, summary, started, ended,
         u.input_tokens, u.output_tokens, u.cached_tokens, u.known_cost, conv_upto),
    )  # fmt: skip


def call_inserted(fixed: Sequence[Any], fields: Sequence[Any]) -> Op:
    """A new call: `fixed` (id, model call id, turn, thread, step, idx, tool, meta, created)
    and the `fields` a call can change (see `call_changed`)."""
    return (
        "turns.call_inserted",
        (*fixed, *fields),
    )


def call_changed(call_id: str, fields: Sequence[Any]) -> Op:
    """What a call can change: args, status, result, error, suspend reason, what it awaits,
    decision, has_message, updated_at, ended_at, in that order."""
    return (
        "turns.call_changed",
        (*fields, call_id),
    )


def call_meta_set(call_id: str, key: str, value: Any) -> Op:
    """One key of a call's meta (`process`: what its tool started; `review`: a crash left
    its outcome unknown), the other keys left as they are."""
    return (
        "turns.call_meta_set",
        (f"$.{key}", json.dumps(value), call_id),
    )


async def call_rows(store: Store, turn_id: str) -> list[Any]:
    return await store.fetchall("turns.call_rows", (turn_id,))


async def awaiting(store: Reads, what: str) -> list[Any]:
    """The suspended calls that wait for `what` (a decision, a review), oldest first."""
    return await store.fetchall(
        "turns.awaiting", (what,)
    )  # fmt: skip


async def call_row(store: Store, call_id: str) -> Any:
    return await store.fetchone("turns.call_row", (call_id,))


def message_appended(thread_id: str, turn_id: str, seq: int, role: str, text: str, body: str,
                     at: float) -> Op:  # fmt: skip
    return (
        "turns.message_appended",
        (thread_id, turn_id, seq, role, text, body, at),
    )


def message_edited(thread_id: str, seq: int, text: str, body: str) -> Op:
    """An operator edited entry `seq` before any request read it (a breakpoint's edit:
    engine/turn/breaks.py); the log is otherwise append-only."""
    return ("turns.message_edited", (text, body, thread_id, seq))


async def message_bodies(store: Store, thread_id: str) -> list[str]:
    """A thread's conversation as stored, in order (each a ConvMessage's JSON)."""
    rows = await store.fetchall("turns.message_bodies", (thread_id,))
    return [row[0] for row in rows]


async def thread_opening(store: Store, thread_id: str) -> tuple[list[str], str | None]:
    """`message_bodies` and the thread's own instructions (`thread_instructions`' first
    column) in one read."""
    rows = await store.fetchall("turns.thread_opening", (thread_id, thread_id))
    bodies = [row[2] for row in rows if row[0] == 0]
    own = [row[2] for row in rows if row[0] == 1]
    return bodies, own[0] if own else None


# -- checkpoints and events -------------------------------------------------------------------


def checkpoint(turn_id: str, run_id: str, kind: str, at: float) -> Op:
    return (
        "turns.checkpoint",
        (turn_id, run_id, kind, at),
    )


EVENTS_PER_INSERT = 500  # rows of one events INSERT (6 parameters each; SQLite takes 32,766)


def events_stored(events: Sequence[Event], run_id: str) -> list[Op]:
    """The events of one checkpoint as one multi-row INSERT (more than EVENTS_PER_INSERT:
    several), in order."""
    ops: list[Op] = []
    for i in range(0, len(events), EVENTS_PER_INSERT):
        chunk = events[i : i + EVENTS_PER_INSERT]
        params: list[Any] = []
        for e in chunk:
            params += (e.at, run_id, e.thread_id, e.turn_id, e.kind, event_json(e))
        ops.append((f"turns.events*{len(chunk)}", params))
    return ops
