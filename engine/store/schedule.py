"""The scheduler's records in execution.db: thread groups, turn requests and the
idempotency keys of requests, written as upserts, and read back when a runtime starts."""

from __future__ import annotations

import sqlite3

from engine.config import Config
from engine.domain.messages import Message
from engine.services.scheduler import GroupConfig, Request, Scheduler
from engine.store.sqlite import Op, Store


async def restore_schedule(
    store: Store, scheduler: Scheduler, config: Config
) -> tuple[set[str], list[Request]]:
    """Rebuild `scheduler` from the room and its config: groups (and write them back),
    threads held by unfinished turns, queued requests. Returns the turns a stopped run
    left `running`, and the requests it had queued (now in the scheduler again)."""
    for row in await store.fetchall("schedule.groups"):
        scheduler.groups[row["name"]] = GroupConfig(
            row["name"], row["priority"], row["max_running_turns"], row["max_queued_turns"],
            row["overflow_policy"], row["coalesce"], bool(row["paused"]),
        )  # fmt: skip
    for name, settings in config.groups.items():
        scheduler.configure(name, **settings.model_dump(exclude_none=True))
    for name, settings in config.groups.items():
        if settings.strategy is not None:
            scheduler.configure(name, strategy=settings.strategy)
    await store.write([group_row(g) for g in scheduler.groups.values()])
    interrupted: set[str] = set()
    for row in await store.fetchall("schedule.open_turns"):
        scheduler.hold(row["thread_id"], row["id"], row["group_name"], row["status"])
        if row["status"] == "running":
            interrupted.add(row["id"])
    queued = []
    for row in await store.fetchall("schedule.queued_requests"):
        req = request_from_row(row)
        scheduler.requeue(req)
        queued.append(req)
    return interrupted, queued


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
