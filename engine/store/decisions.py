"""Decisions in execution.db: the writes a decision makes on its way
(recorded, applied, duplicate, superseded, refused) and the reads a start and a replay need."""

from __future__ import annotations

import json
from typing import Any

from engine.domain.decisions import Decision
from engine.store.sqlite import Op, Store

_INSERT = "decisions.insert"


def recorded(decision: Decision, status: str, at: float, note: str | None = None) -> Op:
    """A decision as it arrives: `queued`, or `duplicate` with why."""
    return (_INSERT, (
        decision.id, decision.call_id, decision.action,
        json.dumps(decision.args) if decision.args is not None else None,
        json.dumps(decision.result) if decision.use_result else None,
        int(decision.use_result), decision.reason, decision.remember, decision.decided_by,
        status, note, at, decision.pattern, decision.args_hash,
        None if decision.sandbox == "default" else decision.sandbox,
    ))  # fmt: skip


def applied(decision_id: str, at: float) -> Op:
    return ("decisions.applied", (at, decision_id))


def duplicate(decision_id: str, note: str) -> Op:
    return ("decisions.duplicate", (note, decision_id))


def left_queued(call_id: str, note: str) -> Op:
    """The call ended: a decision still queued for it, recorded by any runtime sharing the
    store (a cluster's other worker), can never apply."""
    return ("decisions.left_queued",
            (note, call_id))  # fmt: skip


def superseded(decision_id: str, note: str, at: float) -> Op:
    return (
        "decisions.superseded",
        (note, at, decision_id),
    )


def refused(decision_id: str, note: str, at: float) -> Op:
    """Not applied: its arguments are not the ones it approved (engine.decisions.binding)."""
    return (
        "decisions.refused",
        (note, at, decision_id),
    )


def from_row(row: Any) -> Decision:
    return Decision(
        id=row["id"], call_id=row["call_id"], action=row["action"],
        args=json.loads(row["args"]) if row["args"] else None,
        result=json.loads(row["result"]) if row["result"] else None,
        use_result=bool(row["use_result"]), reason=row["reason"], remember=row["remember"],
        pattern=row["pattern"], decided_by=row["decided_by"], args_hash=row["args_hash"],
        sandbox=row["sandbox"] or "default",
    )  # fmt: skip


async def exists(store: Store, decision_id: str) -> bool:
    return bool(await store.scalar("decisions.exists", (decision_id,)))


async def load(store: Store, decision_id: str | None) -> Decision | None:
    row = await store.fetchone("decisions.load", (decision_id,))
    return from_row(row) if row is not None else None


async def queued(store: Store) -> list[Decision]:
    """The decisions recorded and not applied yet, oldest first."""
    rows = await store.fetchall("decisions.queued")
    return [from_row(row) for row in rows]


async def turns_with_queued(store: Store) -> list[str]:
    """The turns whose suspended calls have a queued decision."""
    rows = await store.fetchall("decisions.turns_with_queued")
    return [row[0] for row in rows]
