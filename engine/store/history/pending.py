"""The marks tool calls give their turns that the batch has not written yet.

Since issue 16 a call's marks (tool:<name>, is:failed, is:denied) reach `turn_marks` and
`counters` with the once-a-second batch (engine/store/index_batch.py), not in the step's
transaction. History stays exact for what is committed by reading the marks together with
the calls the batch has not settled (`UNBATCHED`: above its watermark, or open when it
last ran): a filter holds when `turn_marks` has the mark or an unbatched call gives it;
a counter is the stored value plus the turns that only unbatched calls give the mark;
a list driven by such a mark adds those turns (few: a second of calls, and open ones).
Each count or condition is one statement, so it reads one snapshot.
"""

from __future__ import annotations

from typing import Any

from engine.store.index_batch import DENIED, WATERMARK
from engine.store.sql import Dialect

CALL_MARK_STATUS = {"is:failed": "c.status = 'failed'",
                    "is:denied": f"c.status = 'cancelled' AND {DENIED}"}  # fmt: skip


def is_call_mark(mark: str) -> bool:
    """A mark the batch writes (calls give it), which may be pending."""
    return mark.startswith("tool:") or mark in CALL_MARK_STATUS


def turns_sql(d: Dialect, mark: str) -> tuple[str, list[Any]]:
    """A SELECT of the turn ids that unbatched calls give `mark` (a call mark)."""
    if mark.startswith("tool:"):  # given when a call is new: above the watermark only
        return (f"SELECT c.turn_id FROM tool_calls c WHERE c.rowid > {WATERMARK}"
                f" AND c.tool = {d.param}", [mark[len("tool:"):]])  # fmt: skip
    cond = CALL_MARK_STATUS[mark]
    return (
        f"SELECT c.turn_id FROM tool_calls c WHERE c.rowid > {WATERMARK} AND {cond}"
        f" UNION ALL SELECT c.turn_id FROM open_calls o {d.ordered_join} tool_calls c"
        f" ON c.rowid = o.rowid WHERE {cond}",
        [],
    )


def holds_sql(d: Dialect, mark: str, at: str, turn_id: str) -> tuple[str, list[Any]]:
    """The condition that the turn (`at`, `turn_id`: its created_at and id) has `mark`."""
    sql = (f"EXISTS (SELECT 1 FROM turn_marks x WHERE x.mark = {d.param}"
           f" AND x.created_at = {at} AND x.turn_id = {turn_id})")  # fmt: skip
    if not is_call_mark(mark):
        return sql, [mark]
    pending, params = turns_sql(d, mark)
    return f"({sql} OR {turn_id} IN ({pending}))", [mark, *params]


def extra_sql(d: Dialect, mark: str) -> tuple[str, list[Any]]:
    """A count of the turns only unbatched calls give `mark` (a call mark) so far."""
    pending, params = turns_sql(d, mark)
    return (
        f"SELECT count(*) FROM turns t WHERE t.id IN ({pending}) AND NOT EXISTS"
        f" (SELECT 1 FROM turn_marks x WHERE x.mark = {d.param} AND x.created_at = t.created_at"
        " AND x.turn_id = t.id)",
        [*params, mark],
    )


def counters_sql(d: Dialect, names: list[str]) -> tuple[str, list[Any]]:
    """(name, value) rows whose sums per name are the exact counters of `names`."""
    parts = [f"SELECT name, value FROM counters WHERE name IN ({d.params(len(names))})"]
    params: list[Any] = list(names)
    for name in names:
        if is_call_mark(name):
            sql, more = extra_sql(d, name)
            parts.append(f"SELECT {d.param}, ({sql})")
            params += [name, *more]
    return " UNION ALL ".join(parts), params


def tool_counters_sql() -> tuple[str, list[Any]]:
    """(name, value) rows whose sums per name are the exact tool:<name> counters."""
    return (
        "SELECT name, value FROM counters WHERE name >= 'tool:' AND name < 'tool;'"
        " UNION ALL SELECT 'tool:' || c.tool, count(DISTINCT t.id) FROM tool_calls c"
        f" JOIN turns t ON t.id = c.turn_id WHERE c.rowid > {WATERMARK} AND NOT EXISTS"
        " (SELECT 1 FROM turn_marks x WHERE x.mark = 'tool:' || c.tool"
        " AND x.created_at = t.created_at AND x.turn_id = t.id) GROUP BY c.tool",
        [],
    )


def sums(rows: Any) -> dict[str, int]:
    """The (name, value) rows of a counters query, summed per name."""
    out: dict[str, int] = {}
    for name, value in rows:
        out[name] = out.get(name, 0) + value
    return out
