"""The room's decision audit read from the store, a page at a time (engine/domain/audit.py
says what an entry is).

Decisions and rules' verdicts are two tables, each walked in its own index order from a
position on (`audit.decisions`, `audit.rules`: a keyset page, nothing sorted, nothing read
twice) and merged here; a page holds at most MAX_PAGE entries, so an export of a room with
hundreds of thousands of decisions never holds more than two pages' rows. The owner reads
through its store, a command on a room nobody owns through a read-only connection: both
give `Reads`.
"""

from __future__ import annotations

import heapq
import math
from itertools import islice
from operator import itemgetter
from typing import TYPE_CHECKING, Any

from engine.domain.audit import (
    KINDS,
    MAX_PAGE,
    AuditEntry,
    AuditError,
    AuditPage,
    cursor,
    order,
    parse_cursor,
)

if TYPE_CHECKING:
    from engine.store.reader import Reads


async def page(
    store: Reads,
    *,
    since: float | None = None,
    thread: str | None = None,
    decided_by: str | None = None,
    kind: str | None = None,
    after: str | None = None,
    limit: int = MAX_PAGE,
) -> AuditPage:
    """The entries recorded at `since` or later (and after the position `after`), oldest
    first, of `thread`, decided by `decided_by` (exactly as an entry names it), of `kind`
    only; at most `limit`. AuditError for input that cannot be read."""
    if not 1 <= limit <= MAX_PAGE:
        raise AuditError(f"limit must be between 1 and {MAX_PAGE}")
    if kind is not None and kind not in KINDS:
        raise AuditError(f"unknown kind {kind!r}; use one of: {', '.join(KINDS)}")
    if since is not None and not math.isfinite(since):
        raise AuditError("since must be a finite time")
    start = parse_cursor(after) if after is not None else None
    low = (-math.inf if since is None else since, "")
    if start is not None and (start[0], start[1]) > low:
        low = (start[0], start[1])
    # Each table from `low` on (its rows at `low` itself too: a row-value bound, one index
    # range); one row more than a page, so that dropping the entry at `start` (at most one
    # per table: keys are unique in each) still leaves a full page when there is one.
    kinds: tuple[str, ...] = KINDS if kind is None else (kind,)
    fetched: list[list[tuple[tuple[float, str, int], str, Any]]] = []
    full = False
    for name in kinds:
        params = (*low, thread, thread, decided_by, decided_by, limit + 1)
        rows = await store.fetchall(_STATEMENT[name], params)
        full = full or len(rows) > limit
        at, key = _POSITION[name]
        placed = [(order(r[at], r[key], name), name, r) for r in rows]
        if start is not None:
            placed = [p for p in placed if p[0] > order(*start)]
        fetched.append(placed)
    # Merged by position (unique: a key is unique in its table, a kind tells the tables
    # apart); an entry is made only of the rows the page keeps.
    merged = list(islice(heapq.merge(*fetched, key=itemgetter(0)), limit + 1))
    entries = [_ENTRY[name](row) for _, name, row in merged[:limit]]
    more = full or len(merged) > limit
    return AuditPage(entries=entries, next=entries[-1].cursor if more and entries else None)


def _decision(r: Any) -> AuditEntry:
    return AuditEntry(
        kind="decision", decided_by=r["decided_by"], recorded_at=r["created_at"],
        applied_at=r["applied_at"], call_id=r["call_id"], turn_id=r["turn_id"],
        thread_id=r["thread_id"], tool=r["tool"], action=r["action"], status=r["status"],
        note=r["note"], reason=r["reason"] or "", args_hash=r["args_hash"],
        edited=bool(r["edited"]), use_result=bool(r["use_result"]), remember=r["remember"],
        pattern=r["pattern"], sandbox=r["sandbox"] or "default", decision_id=r["id"],
        cursor=cursor(r["created_at"], r["id"], "decision"),
    )  # fmt: skip


def _rule(r: Any) -> AuditEntry:
    made = None
    if r["made_by"] is not None:  # a rule of the store (agentdeck.toml's are not stored)
        made = f"made by {r['made_by']}" + (f" from decision {r['decision_id']}"
                                            if r["decision_id"] else "")  # fmt: skip
    return AuditEntry(
        kind="rule", decided_by=r["decided_by"], recorded_at=r["at"], applied_at=r["at"],
        call_id=r["call_id"], turn_id=r["turn_id"], thread_id=r["thread_id"], tool=r["tool"],
        action=r["effect"], status="applied", note=made, reason=r["reason"] or "",
        pattern=r["pattern"], rule=r["rule"], cursor=cursor(r["at"], r["call_id"], "rule"),
    )  # fmt: skip


_ENTRY = {"decision": _decision, "rule": _rule}
_STATEMENT = {"decision": "audit.decisions", "rule": "audit.rules"}
_POSITION = {"decision": ("created_at", "id"), "rule": ("at", "call_id")}  # its time, its key
