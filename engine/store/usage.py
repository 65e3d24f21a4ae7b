"""What turns spent, per UTC day, group, thread and model (the `usage` table), and the
budgets an operator set (the `budgets` table). A step that spent writes its row and adds
to its day's in the same checkpoint, so the totals are the sum of the steps."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

from engine.domain.usage import Limit, Usage
from engine.store.sqlite import Op

if TYPE_CHECKING:
    from engine.store.reader import Reads

By = Literal["day", "group", "thread", "model"]


def added(day: str, group: str, thread_id: str, model: str, usage: Usage) -> Op:
    """One step's spend, added to its day's row."""
    return (
        "usage.added",
        (day, group, thread_id, model, usage.input_tokens, usage.output_tokens,
         usage.cached_tokens, usage.cost, usage.unpriced),
    )  # fmt: skip


def of_row(row: Any) -> Usage:
    """A row of sums (sqlite gives None for no rows; PostgreSQL numbers as Decimal)."""
    return Usage(
        input_tokens=int(row["input_tokens"] or 0), output_tokens=int(row["output_tokens"] or 0),
        cached_tokens=int(row["cached_tokens"] or 0), cost=float(row["cost"] or 0),
        unpriced=int(row["unpriced"] or 0), steps=int(row["steps"] or 0),
    )  # fmt: skip


async def of_day(store: Reads, day: str) -> list[tuple[str, str, Usage]]:
    """(group, thread, what it spent) for every thread that spent on `day`."""
    rows = await store.fetchall("usage.of_day", (day,))
    return [(r["group_name"], r["thread_id"], of_row(r)) for r in rows]


async def groups_of_day(store: Reads, day: str) -> list[tuple[str, Usage]]:
    """(group, what it spent) for every group that spent on `day` (a few rows, whatever
    the number of threads)."""
    rows = await store.fetchall("usage.groups_of_day", (day,))
    return [(r["group_name"], of_row(r)) for r in rows]


@dataclass(frozen=True)
class Spent:
    """What the room, one group and one thread spent on one day."""

    room: Usage
    group: Usage
    thread: Usage


async def spent(store: Reads, day: str, group: str, thread_id: str) -> Spent:
    rows = {r["scope"]: of_row(r) for r in await store.fetchall(
        "usage.spent", (day, day, group, day, thread_id))}  # fmt: skip
    return Spent(rows["room"], rows["group"], rows["thread"])


async def report(store: Reads, by: By | None, since: str, until: str,
                 limit: int = 1000) -> list[tuple[str, Usage]]:  # fmt: skip
    """(key, total) per day, group, thread or model from `since` to `until` (days, both
    included), biggest spender first (newest day first); by None: one total, key ''."""
    name = {None: "usage.total", "day": "usage.by_day", "group": "usage.by_group",
            "thread": "usage.by_thread", "model": "usage.by_model"}[by]  # fmt: skip
    params = (since, until, limit) if by == "thread" else (since, until)
    rows = await store.fetchall(name, params)
    return [(str(r["key"]), of_row(r)) for r in rows]


async def of_thread(store: Reads, thread_id: str) -> Usage:
    """What a thread spent, all days together."""
    row = await store.fetchone("usage.of_thread", (thread_id,))
    return of_row(row)


@dataclass(frozen=True)
class StoredBudget:
    scope: str
    limit: Limit
    set_by: str
    set_at: float


async def budgets(store: Reads) -> list[StoredBudget]:
    return [
        StoredBudget(
            r["scope"],
            Limit(
                None if r["tokens"] is None else int(r["tokens"]),
                None if r["cost"] is None else float(r["cost"]),
            ),
            r["set_by"],
            float(r["set_at"]),
        )  # fmt: skip
        for r in await store.fetchall("usage.budgets")
    ]


def budget_set(scope: str, limit: Limit, by: str, at: float) -> Op:
    return ("usage.budget_set", (scope, limit.tokens, limit.cost, by, at))


def budget_cleared(scope: str) -> Op:
    return ("usage.budget_cleared", (scope,))
