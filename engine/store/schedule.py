"""The scheduler's records in execution.db: thread groups, turn requests and the
idempotency keys of requests, written as upserts, and read back when a runtime starts
(`read_schedule`; engine/services/restore.py rebuilds the scheduler from it)."""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass

from engine.domain.messages import Message
from engine.domain.requests import GroupConfig, Request
from engine.store.sqlite import Op, Store


@dataclass(frozen=True)
class Held:
    """A thread an unfinished turn holds."""

    thread_id: str
    turn_id: str
    group: str
    status: str  # running (a stopped run left it) or waiting


@dataclass(frozen=True)
class StoredSchedule:
    """What the room keeps of its schedule: groups, threads held, queued requests."""

    groups: list[GroupConfig]
    held: list[Held]
    queued: list[Request]


async def read_schedule(store: Store) -> StoredSchedule:
    """The room's stored schedule, to rebuild a scheduler from when a runtime starts."""
    groups = [GroupConfig(r["name"], r["priority"], r["max_running_turns"],
                          r["max_queued_turns"], r["overflow_policy"], r["coalesce"],
                          bool(r["paused"])) for r in await store.fetchall("schedule.groups")]  # fmt: skip
    held = [Held(r["thread_id"], r["id"], r["group_name"], r["status"])
            for r in await store.fetchall("schedule.open_turns")]  # fmt: skip
    queued = [request_from_row(r) for r in await store.fetchall("schedule.queued_requests")]
    return StoredSchedule(groups, held, queued)


def request_from_row(row: sqlite3.Row) -> Request:
    """A turn_requests row as the scheduler's Request, status and all."""
    return Request(
        row["id"], Message.model_validate_json(row["message"]), row["group_name"],
        row["created_at"], row["strategy"], row["status"], row["reason"], row["coalesced_into"],
    )  # fmt: skip


async def stored_request(store: Store, request_id: str) -> Request | None:
    """A turn request as execution.db has it."""
    row = await store.fetchone("schedule.stored_request", (request_id,))
    return request_from_row(row) if row is not None else None


async def keyed_request(store: Store, key: str) -> Request | None:
    """The request an offer with idempotency key `key` made, if one did."""
    row = await store.fetchone(
        "schedule.keyed_request", (key,)
    )  # fmt: skip
    return request_from_row(row) if row is not None else None


async def coalesced_into(store: Store, request_id: str) -> str | None:
    """The request a coalesced request went into (None: it was not coalesced)."""
    return await store.scalar(  # type: ignore[no-any-return]
        "schedule.coalesced_into",
        (request_id,),
    )


def key_row(key: str, request_id: str, now: float) -> Op:
    """Written with the request it names: a second insert of the key fails the transaction."""
    return (
        "schedule.key_row",
        (key, request_id, now),
    )


def request_row(req: Request, now: float) -> Op:
    return (
        "schedule.request_row",
        (req.id, req.thread_id, req.group, req.message.model_dump_json(), req.strategy,
         req.status, req.reason, req.coalesced_into, req.created_at, now),
    )  # fmt: skip


def group_row(g: GroupConfig) -> Op:
    return (
        "schedule.group_row",
        (g.name, g.priority, g.max_running_turns, g.max_queued_turns, g.overflow_policy,
         g.coalesce, int(g.paused)),
    )  # fmt: skip
