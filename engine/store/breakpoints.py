"""Breakpoints in execution.db: made, removed (kept, marked), and the pauses each made,
which are its hits (engine/domain/breakpoints.py)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from engine.domain.breakpoints import Breakpoint
from engine.store.sqlite import Op

if TYPE_CHECKING:
    from engine.store.reader import Reads


def made(point: Breakpoint) -> Op:
    return (
        "breakpoints.made",
        (point.id, point.kind, point.tool, point.pattern, point.scope, point.thread_id,
         point.group, point.made_by, point.made_at or 0.0, point.reason),
    )  # fmt: skip


def removed(point_id: str, by: str, at: float) -> Op:
    return ("breakpoints.removed", (at, by, point_id))


def hit(point: Breakpoint, call_id: str) -> Op:
    """`point` paused a turn with the call `call_id`: written with the call."""
    return ("breakpoints.hit", (call_id, point.id, point.last_hit or 0.0))


async def load(store: Reads) -> list[Breakpoint]:
    """The breakpoints not removed, with their hits so far."""
    hits = {row["breakpoint"]: (row["n"], row["last"])
            for row in await store.fetchall("breakpoints.hits")}  # fmt: skip
    points = []
    for r in await store.fetchall("breakpoints.live"):
        n, last = hits.get(r["id"], (0, None))
        points.append(Breakpoint(
            id=r["id"], kind=r["kind"], tool=r["tool"], pattern=r["pattern"], scope=r["scope"],
            thread_id=r["thread_id"], group=r["group_name"], made_by=r["made_by"],
            made_at=r["made_at"], reason=r["reason"], hits=n, last_hit=last,
        ))  # fmt: skip
    return points
