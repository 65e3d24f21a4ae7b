"""The once-a-second batch on PostgreSQL: only the marks tool calls give their turns.

On SQLite the batch (engine/store/index_batch.py) also fills the FTS5 indexes; here the
full text is a generated tsvector column of `messages` and `tool_calls` (pg/schema.sql),
current in the step's own transaction. What is left is the marks: the same statements,
reading the same watermark and `open_calls`, with `indexed` kept 0 (no text to take out).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from engine.store.index_batch import (
    OPEN,
    UNBATCHED,
    _call_marks,  # noqa: PLC2701 - the same marks as SQLite
)

PG_INDEX_BATCH: list[tuple[str, Sequence[Any]]] = [
    (_call_marks(), ()),
    ("DELETE FROM open_calls WHERE rowid IN (SELECT o.rowid FROM open_calls o"
     f" CROSS JOIN tool_calls c ON c.rowid = o.rowid WHERE c.status NOT IN {OPEN})", ()),
    ("INSERT INTO open_calls(rowid, indexed) SELECT c.rowid, 0"
     f" FROM {UNBATCHED} u CROSS JOIN tool_calls c ON c.rowid = u.rowid WHERE c.status IN {OPEN}"
     " ON CONFLICT(rowid) DO NOTHING", ()),
    ("UPDATE counters SET value = (SELECT coalesce(max(rowid), 0) FROM tool_calls)"
     " WHERE name = 'marks:calls'", ()),
]  # fmt: skip
