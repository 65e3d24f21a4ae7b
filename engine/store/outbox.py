"""The outbox in execution.db: answers owed to a channel, and what became of each.

A turn that came from a delivering channel and ended with an answer adds `outbox_row` to
its final checkpoint, so the answer is owed exactly when the turn is durably done. The
delivery worker (engine/services/delivery.py) reads the rows that are due, one per thread (the
oldest one still open: a thread's answers leave in order), and marks each sent, retrying
or dead; the operator retries or drops a dead one. States: pending (never tried), retrying
(tried, waits for `next_at`), sent, dead (tries used up, or refused for good), dropped (an
operator gave up on it).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from engine.domain.events import DeliveryChanged
from engine.store.sqlite import Op, Store

OPEN = ("pending", "retrying")  # states that hold their thread's later answers back
STATES = ("pending", "retrying", "sent", "dead", "dropped")


def outbox_row(turn_id: str, thread_id: str, channel: str, reply: dict[str, Any], text: str,
               at: float) -> Op:  # fmt: skip
    """An answer owed to `channel`, keyed by its turn (a second one for the turn is
    ignored: a turn answers once)."""
    return (
        "outbox.queued",
        (turn_id, thread_id, channel, json.dumps(reply), text, turn_id, at, at),
    )


async def due(store: Store, now: float, limit: int, busy: Sequence[str] = ()) -> list[Any]:
    """Up to `limit` answers to send now: each the oldest open one of its thread, due by
    `now`, of a thread not in `busy` (one of its answers is being sent)."""
    return await store.fetchall("outbox.due", (now, json.dumps(list(busy)), limit))


async def next_at(store: Store, busy: Sequence[str] = ()) -> float | None:
    """When the next answer of a thread not in `busy` becomes due (None: none is owed)."""
    found = await store.scalar("outbox.next_due", (json.dumps(list(busy)),))
    return None if found is None else float(found)


def sent(outbox_id: int, tries: int, at: float) -> Op:
    """It left (whatever an operator did meanwhile: it did leave)."""
    return (
        "outbox.sent",
        (tries, at, at, outbox_id),
    )


def attempted(outbox_id: int, tries: int) -> Op:
    """A try starts: counted before it leaves, so a process that dies during every try of
    one answer (the answer kills it) still brings it to `dead`, not round and round."""
    return (
        "outbox.attempted",
        (tries, outbox_id),
    )


def failed(outbox_id: int, state: str, tries: int, next_at: float, error: str) -> Op:
    """A try failed: `retrying` at `next_at`, or `dead`. An answer an operator dropped
    while it was being tried stays dropped."""
    return (
        "outbox.failed",
        (state, tries, next_at, error, outbox_id),
    )


def retried(outbox_id: int, at: float) -> Op:
    """An operator sends a dead answer again: pending, with its tries counted afresh."""
    return (
        "outbox.retried",
        (at, outbox_id),
    )


def dropped(outbox_id: int) -> Op:
    """An operator gives up on a dead or retrying answer."""
    return (
        "outbox.dropped",
        (outbox_id,),
    )


async def row(store: Store, outbox_id: int) -> Any:
    return await store.fetchone("outbox.row", (outbox_id,))


async def counts(store: Store) -> dict[str, int]:
    """How many answers are in each state (every state named, 0 when none)."""
    found = {s: int(n) for s, n in await store.fetchall("outbox.counts")}
    return {state: found.get(state, 0) for state in STATES}


async def listing(store: Store, states: Sequence[str] = (), limit: int = 100,
                  before: int | None = None) -> list[Any]:  # fmt: skip
    """Answers newest first, `limit` at a time (`before`: the id the last page ended at),
    only those in `states` when given."""
    below = (1 << 62) if before is None else before
    return await store.fetchall(
        "outbox.listing", (json.dumps(list(states or STATES)), below, limit)
    )


def answer_owed(turn_id: str, thread_id: str, channel: str, reply: dict[str, Any], text: str,
                at: float) -> tuple[Op, DeliveryChanged]:  # fmt: skip
    """The outbox row of a turn's answer and its event, for the turn's final checkpoint."""
    event = DeliveryChanged(at=at, thread_id=thread_id, turn_id=turn_id, channel=channel,
                            key=turn_id, state="pending")  # fmt: skip
    return outbox_row(turn_id, thread_id, channel, reply, text, at), event
