"""Forks and replays (engine/domain/forks.py): what `LocalClient.fork` and `replay` do.

Both make a thread of their own from another thread's record: its entries copied (under a
turn id of no turn, `fork:THREAD`, so neither thread's turns gain entries), a `forks` row
saying where it came from, and its first turn offered at once: a fork's answers what the
copied record ends with (no new message: it `continues`), a replay's is the recorded
turn's message again, with the turn's recorded calls on its record.
"""

from __future__ import annotations

import uuid
from typing import Any

from engine.api.client import Conflict, Invalid, NotFound
from engine.api.fork_models import ForkBody, ReplayBody
from engine.domain.forks import Forked, cut
from engine.domain.messages import ConvMessage, Message
from engine.runtime import Runtime
from engine.store import forks
from engine.store import turns as rows


async def fork(rt: Runtime, body: ForkBody) -> Forked:
    """Fork a thread at a step: `NotFound` for no such turn or step, `Invalid` for an edit
    of an entry it does not copy or may not change, `Conflict` for a thread that exists."""
    at = await forks.step_cut(rt.store, body.turn_id, body.step_id)
    if at is None:
        raise NotFound(f"no step {body.step_id} in turn {body.turn_id[:40]}")
    source, upto, _ = at
    entries = [
        ConvMessage.model_validate_json(b) for b in await forks.bodies(rt.store, source, 2**62)
    ]
    upto = cut([e.role for e in entries], upto)  # a step that made calls: with their results
    entries = entries[:upto]
    edits = _edits(body.edits, entries)
    group = await _group(rt, body.group, source)
    thread = await _new_thread(rt, body.thread_id, source, "fork")
    record = Forked(thread_id=thread, kind="fork", from_thread=source, from_turn=body.turn_id,
                    from_step=body.step_id, upto=upto, edited=edits, group=group,
                    made_by=body.by, made_at=rt.clock())  # fmt: skip
    await _write(rt, record, entries)
    if entries and entries[-1].role != "assistant":  # the record waits for an answer: go on
        text = f"(fork of {body.turn_id} at step {body.step_id})"
        handle = await rt.submit(Message(origin="invoke", sender=body.by, thread_id=thread,
                                         text=text, meta={"group": group, "continues": True}))  # fmt: skip
        record = record.model_copy(update={"turn_id": handle.turn_id})
    rt.log.info("thread %s forked from %s at step %s by %s", thread, source, body.step_id, body.by)
    return record


async def replay(rt: Runtime, body: ReplayBody) -> Forked:
    """Replay a recorded turn on its recorded results in a scratch thread: `NotFound` for
    no such turn, `Invalid` for a model, group or turn that cannot be replayed."""
    row = await rows.turn_row(rt.store, body.turn_id)
    if row is None:
        raise NotFound(f"no turn {body.turn_id[:40]}")
    source = row["thread_id"]
    start = await forks.turn_start(rt.store, body.turn_id)
    if start is None or not row["text"]:
        raise Invalid(f"turn {body.turn_id} has no message of its own to answer again")
    entries = [
        ConvMessage.model_validate_json(b) for b in await forks.bodies(rt.store, source, start)
    ]
    group = await _group(rt, body.group, source)
    meta: dict[str, Any] = {"group": group, "replay": {
        "of": body.turn_id, "calls": await forks.turn_calls(rt.store, body.turn_id)}}  # fmt: skip
    if body.model is not None:
        provider, _, name = body.model.partition(":")
        if provider not in ("offline", "openai", "anthropic"):
            raise Invalid(
                f"model {body.model!r}: a provider (offline, openai, anthropic), ':', a name"
            )
        meta["model"] = {"provider": provider, "model": name}
    thread = await _new_thread(rt, body.thread_id, source, "replay")
    record = Forked(thread_id=thread, kind="replay", from_thread=source, from_turn=body.turn_id,
                    upto=start, group=group, made_by=body.by, made_at=rt.clock())  # fmt: skip
    await _write(rt, record, entries)
    if body.instructions is not None:
        await rt.instructions.set_thread(thread, group, body.instructions, rt.clock())
    # (never a channel's: a replay answers nobody, and `chat` without a channel is refused)
    origin = row["origin"] if row["origin"] in ("invoke", "task", "chore", "will") else "invoke"
    message = Message(origin=origin, sender=body.by, thread_id=thread, text=row["text"], meta=meta)
    handle = await rt.submit(message, strategy=body.strategy or row["strategy"])
    rt.log.info("turn %s replayed in %s by %s", body.turn_id, thread, body.by)
    return record.model_copy(update={"turn_id": handle.turn_id})


def _edits(said: dict[str, str], entries: list[ConvMessage]) -> dict[int, str]:
    edits = {}
    for key, text in said.items():
        if not key.isdigit() or int(key) >= len(entries):
            raise Invalid(
                f"entry {key[:20]} is not in the fork (it copies entries 0 to {len(entries) - 1})"
            )
        if entries[int(key)].role not in ("user", "tool") or entries[int(key)].compaction:
            raise Invalid(f"entry {key}: only a user message or a tool result can be edited")
        edits[int(key)] = text
    return edits


async def _group(rt: Runtime, group: str | None, source: str) -> str:
    if group is None:
        found = await rows.thread_instructions(rt.store, source)
        return found["group_name"] if found is not None else "chat"
    if group not in rt.scheduler.groups:
        raise Invalid(f"unknown group {group!r} (groups: {', '.join(sorted(rt.scheduler.groups))})")
    return group


async def _new_thread(rt: Runtime, thread: str | None, source: str, kind: str) -> str:
    if thread is None:
        return f"{source}~{kind}-{uuid.uuid4().hex[:4]}"
    if await rows.thread_instructions(rt.store, thread) is not None:
        raise Conflict(f"thread {thread[:60]} exists: a fork makes a thread of its own")
    return thread


async def _write(rt: Runtime, record: Forked, entries: list[ConvMessage]) -> None:
    """The new thread, its copied entries (edited as said) and its origin, in one write."""
    now, marker = record.made_at, f"fork:{record.thread_id}"
    ops = [rows.thread_instructions_set(record.thread_id, record.group, None, now)]
    for seq, entry in enumerate(entries):
        if seq in record.edited:
            entry = entry.model_copy(update={"text": record.edited[seq]})
        ops.append(forks.copied(record.thread_id, marker, seq, entry.role, entry.text,
                                entry.model_dump_json(), now))  # fmt: skip
    ops.append(forks.made(record.thread_id, record.kind, record.from_thread, record.from_turn,
                          record.from_step, record.upto, record.edited, record.group,
                          record.made_by, now))  # fmt: skip
    await rt.store.write(ops)
