"""How the writer runs one batch with few statements: rows of the same SQL, one `executemany`.

Every statement the writer's thread runs releases the GIL and has to take it back, which,
while the event loop runs Python, can cost up to the switch interval. So a batch is first
tried as a plan of groups (one SQL, the rows of every write that uses it), with no savepoint
per write; if any statement fails, the writer rolls the batch back and runs it again write
by write, a savepoint each (writer.py), so a failing write still fails alone.

Which statements may run before others that were queued earlier (what a plan may reorder):
- the statements of one write keep their order;
- rows of one SQL keep their order (they are rows of one group, or of groups in order);
- INSERTs into one table keep their order whatever their SQL (ids follow the queue);
- writes with the same key (a turn's id), or with no key, keep their order against each
  other: a write without a key is a barrier nothing moves across. Writes with different
  keys touch different rows (a turn's own) apart from the orders kept above, and counters
  that triggers add to, which commute.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from typing import Any

Group = tuple[str, list[Sequence[Any]]]  # SQL, its rows in order

_DML = re.compile(r"\s*(INSERT|UPDATE|DELETE|REPLACE)\b", re.IGNORECASE)
_INSERT_INTO = re.compile(
    r"\s*(?:INSERT|REPLACE)(?:\s+OR\s+\w+)?\s+INTO\s+([\w\"]+)", re.IGNORECASE
)
_kinds: dict[str, tuple[bool, str | None]] = {}  # SQL -> (DML, the table it inserts into)


def _kind(sql: str) -> tuple[bool, str | None]:
    kind = _kinds.get(sql)
    if kind is None:
        m = _INSERT_INTO.match(sql)
        kind = (_DML.match(sql) is not None, m.group(1).strip('"').lower() if m else None)
        if len(_kinds) < 4096:  # statements are a fixed set; never grow without bound
            _kinds[sql] = kind
    return kind


def plan(writes: Iterable[tuple[str | None, Sequence[tuple[str, Sequence[Any]]]]]) -> list[Group]:
    """The groups that run `writes` ((key, ops) in queue order) as the rules above allow."""
    groups: list[Group] = []
    start = 0  # the first group the current stretch of keyed writes may add to
    last_sql: dict[str, int] = {}  # the last group of each SQL (from `start` on)
    last_insert: dict[str, int] = {}  # the last group inserting into each table
    keys: set[str] = set()
    for key, ops in writes:
        if key is None or key in keys:  # a barrier before it
            start, keys = len(groups), set()
            last_sql.clear()
        if key is not None:
            keys.add(key)
        last = start  # this write's statements go at or after its previous one
        for sql, params in ops:
            dml, table = _kind(sql)
            at = last_sql.get(sql, -1) if dml else -1
            if table is not None and last_insert.get(table, -1) > at:
                at = -1
            if at >= last:
                groups[at][1].append(params)
            else:
                at = len(groups)
                groups.append((sql, [params]))
                last_sql[sql] = at
            if table is not None:
                last_insert[table] = at
            last = at
        if key is None:  # and after it
            start = len(groups)
            last_sql.clear()
    return groups
