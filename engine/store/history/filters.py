"""Filters, cursors and SQL for `engine.api.history`: keyset paging only, by index only.

A filtered turn list is driven by `turn_marks` (one row per facet of a turn, keyed by the
turn's `created_at`), starting from the rarest facet asked for (its size is a counter) and
checking the others by primary key. Nothing here reads a whole table.
"""

from __future__ import annotations

import re
import time
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from engine.store.history.pending import holds_sql
from engine.store.history.pending import turns_sql as unbatched_turns_sql
from engine.store.sql import Dialect

# Turn statuses a filter takes: the lifecycle's own, and three derived ones.
RAW_STATUSES = ("running", "waiting", "done")
DERIVED_STATUSES = {
    "failed": "is:failed",  # a call failed, or the turn ended with `error`
    "denied": "is:denied",  # a call was cancelled by a decision
    "cancelled": "is:cancelled",  # the turn was cancelled
}
STATUSES = (*RAW_STATUSES, *DERIVED_STATUSES)

TURN_COLUMNS = (
    "t.id, t.thread_id, t.run_id, t.origin, t.channel, t.sender, t.text, t.strategy,"
    " t.status, t.reason, t.detail, t.rounds, t.input_tokens, t.output_tokens, t.final_text,"
    " t.created_at, t.updated_at, t.ended_at,"
    " (SELECT h.group_name FROM threads h WHERE h.id = t.thread_id) AS group_name,"
    " (SELECT count(*) FROM tool_calls c WHERE c.turn_id = t.id) AS calls,"
    " (SELECT count(*) FROM steps s WHERE s.turn_id = t.id) AS steps"
)
# The hash of what a turn was told and the model that answered it, columns of its own row
# (no join: a list stays a walk of turns); a room that predates them (read before a runtime
# upgrades it) has neither.
TOLD_COLUMN = ", t.instructions"
MODEL_COLUMN = ", t.model"
# What a turn spent besides its tokens in and out (issue 33), of its own row too.
USAGE_COLUMNS = ", t.cached_tokens, t.cost, t.unpriced"
# When retention pruned a turn's steps, and how many it had (issue 35).
PRUNED_COLUMNS = ", t.pruned_at, t.pruned_steps"


def turn_columns(told: bool, modelled: bool = True, priced: bool = True,
                 pruned: bool = True) -> str:  # fmt: skip
    """The columns of a listed turn; `told`: the room's turns record their instructions,
    `modelled`: the model that answered them, `priced`: what they spent, `pruned`: whether
    retention pruned them."""
    return (TURN_COLUMNS + (TOLD_COLUMN if told else "") + (MODEL_COLUMN if modelled else "")
            + (USAGE_COLUMNS if priced else "") + (PRUNED_COLUMNS if pruned else ""))  # fmt: skip


class HistoryError(ValueError):
    """Bad input to a history query (a filter, a time, a cursor, a search); says what."""


class UnknownTurn(HistoryError, LookupError):
    """No turn with that id in the room."""


@dataclass(frozen=True)
class Filters:
    """What a turn list or a search keeps; every filter given must hold (AND).

    `since` and `until` are Unix seconds on the turn's `created_at` (a search: the hit's),
    `since` inclusive, `until` exclusive.
    """

    status: str | None = None
    origin: str | None = None
    group: str | None = None
    thread: str | None = None
    tool: str | None = None
    run: str | None = None
    since: float | None = None
    until: float | None = None

    def __post_init__(self) -> None:
        if self.status is not None and self.status not in STATUSES:
            raise HistoryError(f"unknown status {self.status!r}; use one of: {', '.join(STATUSES)}")
        if self.since is not None and self.until is not None and self.since >= self.until:
            raise HistoryError("the time range is empty: since must be before until")

    def marks(self) -> list[str]:
        """The `turn_marks` facets these filters ask for."""
        out = []
        if self.status is not None:
            out.append(DERIVED_STATUSES.get(self.status, f"status:{self.status}"))
        for prefix, value in (("origin", self.origin), ("group", self.group),
                              ("thread", self.thread), ("tool", self.tool), ("run", self.run)):  # fmt: skip
            if value is not None:
                out.append(f"{prefix}:{value}")
        return out

    @property
    def empty(self) -> bool:
        return not self.marks() and self.since is None and self.until is None


MAX_LIMIT = 1000


def check_limit(limit: int) -> int:
    """A page size: 1 to MAX_LIMIT rows."""
    if not 1 <= limit <= MAX_LIMIT:
        raise HistoryError(f"limit must be between 1 and {MAX_LIMIT}")
    return limit


_RELATIVE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(s|m|h|d|w)\s*$", re.IGNORECASE)
_UNIT = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 7 * 86400}


def parse_time(text: str, now: float | None = None) -> float:
    """Unix seconds from ISO date/time (local time if no zone) or `30m`, `2h`, `3d`, `1w` ago."""
    if m := _RELATIVE.match(text):
        return (time.time() if now is None else now) - float(m[1]) * _UNIT[m[2].lower()]
    try:
        return datetime.fromisoformat(text.strip()).timestamp()
    except ValueError:
        raise HistoryError(
            f"bad time {text!r}: give an ISO date or time (2025-01-31, 2025-01-31T14:00) "
            "or an age (90s, 30m, 2h, 3d, 1w)"
        ) from None


def turn_cursor(created_at: float, turn_id: str) -> str:
    """The cursor of a listed row: the next page starts after it (repr keeps the float exact)."""
    return f"{created_at!r}:{turn_id}"


def parse_turn_cursor(cursor: str) -> tuple[float, str]:
    at, sep, ident = cursor.partition(":")
    try:
        if not sep or not ident:
            raise ValueError
        return float(at), ident
    except ValueError:
        raise HistoryError(f"bad cursor {cursor!r}: use the `cursor` of a listed row") from None


def search_cursor(message_bound: int | None, call_bound: int | None) -> str:
    """Where a search resumes: below these message and call rowids (empty: from the top)."""
    return f"s{'' if message_bound is None else message_bound}:{'' if call_bound is None else call_bound}"


def parse_search_cursor(cursor: str) -> tuple[int | None, int | None]:
    try:
        if not cursor.startswith("s"):
            raise ValueError
        m, c = cursor[1:].split(":")
        return (int(m) if m else None), (int(c) if c else None)
    except ValueError:
        raise HistoryError(f"bad search cursor {cursor!r}: use the `cursor` of a hit") from None


def search_words(text: str) -> list[tuple[str, bool]]:
    """The words of a plain search, each with whether it is a prefix (a trailing `*`);
    words without a letter or digit are left out."""
    out = []
    for word in text.split():
        bare = word.rstrip("*")
        if any(ch.isalnum() for ch in bare):
            out.append((bare, word.endswith("*")))
    return out


def fts_query(text: str) -> str:
    """Plain words -> an FTS5 query that cannot be malformed: every word a quoted phrase
    (all must match); a trailing `*` keeps prefix matching. Operators are just words."""
    terms = ['"' + word.replace('"', '""') + '"' + ("*" if prefix else "")
             for word, prefix in search_words(text)]  # fmt: skip
    if not terms:
        raise HistoryError(f"nothing to search for in {text!r}: give at least one word")
    return " ".join(terms)


def holds(d: Dialect, mark: str, at: str, turn_id: str, batched: bool) -> tuple[str, list[Any]]:
    """The condition that a turn has `mark`; `batched`: the room's call marks are written
    by the batch, so calls it has not seen yet count too (engine.store.history.pending)."""
    if batched:
        return holds_sql(d, mark, at, turn_id)
    return (f"EXISTS (SELECT 1 FROM turn_marks x WHERE x.mark = {d.param}"
            f" AND x.created_at = {at} AND x.turn_id = {turn_id})", [mark])  # fmt: skip


def turns_sql(
    d: Dialect, filters: Filters, driver: str | None, after: tuple[float, str] | None,
    limit: int, batched: bool = False, told: bool = True, modelled: bool = True,
    priced: bool = True, pruned: bool = True,
) -> tuple[str, list[Any]]:  # fmt: skip
    """A page of turns, newest first, after the cursor. `driver` is the mark to walk (the
    rarest asked for); the other marks are checked by primary key. `told`: with the hash of
    each turn's instructions; `modelled`: with the model that answered it; `priced`: with
    what it spent (`turn_columns`)."""
    p = d.param
    params: list[Any] = []
    if driver is None:
        where = ["true"]
        at, ident, order = "t.created_at", "t.id", "t.created_at DESC, t.id DESC"
        source = "turns t"
    else:
        where = [f"m.mark = {p}", "t.id = m.turn_id"]
        params.append(driver)
        at, ident, order = "m.created_at", "m.turn_id", "m.created_at DESC, m.turn_id DESC"
        source = "turn_marks m CROSS JOIN turns t"  # (spelled alike in both)
    if filters.since is not None:
        where.append(f"{at} >= {p}")
        params.append(filters.since)
    if filters.until is not None:
        where.append(f"{at} < {p}")
        params.append(filters.until)
    if after is not None:
        where.append(f"({at}, {ident}) < ({p}, {p})")
        params.extend(after)
    for mark in filters.marks():
        if mark != driver:
            cond, more = holds(d, mark, at, ident, batched)
            where.append(cond)
            params.extend(more)
    params.append(limit)
    sql = (
        f"SELECT {turn_columns(told, modelled, priced, pruned)} FROM {source}"
        f" WHERE {' AND '.join(where)}"
        f" ORDER BY {order} LIMIT {p}"
    )
    return sql, params


def pending_turns_sql(
    d: Dialect,
    filters: Filters,
    driver: str,
    after: tuple[float, str] | None,
    told: bool = True,
    modelled: bool = True,
    priced: bool = True,
    pruned: bool = True,
) -> tuple[str, list[Any]]:
    """The turns that only calls the batch has not seen yet may give the driver mark (a
    call mark), with every filter: a few rows, which `History.turns` merges into the page
    the marks give (`turns_sql`)."""
    p = d.param
    pending, params = unbatched_turns_sql(d, driver)
    where = [f"t.id IN ({pending})"]
    if filters.since is not None:
        where.append(f"t.created_at >= {p}")
        params.append(filters.since)
    if filters.until is not None:
        where.append(f"t.created_at < {p}")
        params.append(filters.until)
    if after is not None:
        where.append(f"(t.created_at, t.id) < ({p}, {p})")
        params.extend(after)
    for mark in filters.marks():
        if mark != driver:
            cond, more = holds(d, mark, "t.created_at", "t.id", True)
            where.append(cond)
            params.extend(more)
    columns = turn_columns(told, modelled, priced, pruned)
    return f"SELECT {columns} FROM turns t WHERE {' AND '.join(where)}", params


def legacy_thread_sql(
    filters: Filters, after: tuple[float, str] | None, limit: int
) -> tuple[str, list[Any]]:
    """A thread's turns in a room whose database predates `turn_marks` (read-only: it
    cannot be upgraded from here; only SQLite's rooms are that old)."""
    where: list[str] = ["t.thread_id = ?"]
    params: list[Any] = [filters.thread]
    if after is not None:
        where.append("(t.created_at, t.id) < (?, ?)")
        params.extend(after)
    sql = (
        f"SELECT {TURN_COLUMNS} FROM turns t WHERE {' AND '.join(where)}"
        " ORDER BY t.created_at DESC, t.id DESC LIMIT ?"
    )
    return sql, [*params, limit]


def hit_filter_sql(
    d: Dialect, filters: Filters, at: str, turn_id: str, batched: bool = False
) -> tuple[str, list[Any]]:
    """Conditions a search hit's turn must meet (its marks, by primary key) and its time."""
    where: list[str] = []
    params: list[Any] = []
    if filters.since is not None:
        where.append(f"{at} >= {d.param}")
        params.append(filters.since)
    if filters.until is not None:
        where.append(f"{at} < {d.param}")
        params.append(filters.until)
    for mark in filters.marks():
        cond, more = holds(d, mark, "ft.created_at", "ft.id", batched)
        where.append(f"EXISTS (SELECT 1 FROM turns ft WHERE ft.id = {turn_id} AND {cond})")
        params.extend(more)
    return "".join(f" AND {w}" for w in where), params


def search_sql(kind: str, where: str, bounded: bool) -> str:
    """Newest hits first from one FTS table (`message` or `call`), rowid-keyed (SQLite's
    FTS5; PostgreSQL's search is engine/store/pg/history.py)."""
    if kind == "message":
        return (
            "SELECT m.id AS rid, m.id AS message_id, NULL AS call_id, m.turn_id, m.thread_id,"
            " m.role, NULL AS tool, NULL AS status, m.seq, m.created_at,"
            " snippet(messages_fts, 0, '[', ']', '…', 12) AS snippet"
            " FROM messages_fts CROSS JOIN messages m ON m.id = messages_fts.rowid"
            " WHERE messages_fts MATCH ?"
            + (" AND messages_fts.rowid < ?" if bounded else "")
            + where
            + " ORDER BY messages_fts.rowid DESC LIMIT ?"
        )
    return (
        "SELECT c.rowid AS rid, NULL AS message_id, c.id AS call_id, c.turn_id, c.thread_id,"
        " NULL AS role, c.tool, c.status, NULL AS seq, c.created_at,"
        " snippet(calls_fts, -1, '[', ']', '…', 12) AS snippet"
        " FROM calls_fts CROSS JOIN tool_calls c ON c.rowid = calls_fts.rowid"
        " WHERE calls_fts MATCH ?"
        + (" AND calls_fts.rowid < ?" if bounded else "")
        + where
        + " ORDER BY calls_fts.rowid DESC LIMIT ?"
    )
