"""Upserts of the scheduler's records: turn requests and thread groups."""

from __future__ import annotations

from engine.scheduler import GroupConfig, Request
from engine.store.sqlite import Op


def request_row(req: Request, now: float) -> Op:
    return (
        "INSERT INTO turn_requests(id, thread_id, group_name, message, strategy, status, reason,"
        " coalesced_into, created_at, updated_at) VALUES (?,?,?,?,?,?,?,?,?,?)"
        " ON CONFLICT(id) DO UPDATE SET status=excluded.status, reason=excluded.reason,"
        " coalesced_into=excluded.coalesced_into, updated_at=excluded.updated_at",
        (req.id, req.thread_id, req.group, req.message.model_dump_json(), req.strategy,
         req.status, req.reason, req.coalesced_into, req.created_at, now),
    )  # fmt: skip


def group_row(g: GroupConfig) -> Op:
    return (
        "INSERT INTO thread_groups(name, priority, max_running_turns, max_queued_turns,"
        " overflow_policy, coalesce, paused) VALUES (?,?,?,?,?,?,?) ON CONFLICT(name) DO UPDATE"
        " SET priority=excluded.priority, max_running_turns=excluded.max_running_turns,"
        " max_queued_turns=excluded.max_queued_turns, overflow_policy=excluded.overflow_policy,"
        " coalesce=excluded.coalesce, paused=excluded.paused",
        (g.name, g.priority, g.max_running_turns, g.max_queued_turns, g.overflow_policy,
         g.coalesce, int(g.paused)),
    )  # fmt: skip
