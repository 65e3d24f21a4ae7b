"""The once-a-second batch on PostgreSQL: only the marks tool calls give their turns.

On SQLite the batch (engine/store/index_batch.py) also fills the FTS5 indexes; here the
full text is a generated tsvector column of `messages` and `tool_calls` (pg/schema.sql),
current in the step's own transaction. What is left is the marks: the same named statements,
reading the same watermark and `open_calls`, with `indexed` kept 0 (no text to take out).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from engine.store.index_batch import OPEN, UNBATCHED

PG_INDEX_BATCH: list[tuple[str, Sequence[Any]]] = [
    ("marks.calls", ()),
    ("marks.settled", ()),
    ("INSERT INTO open_calls(rowid, indexed) SELECT c.rowid, 0"
     f" FROM {UNBATCHED} u JOIN tool_calls c ON c.rowid = u.rowid WHERE c.status IN {OPEN}"
     " ON CONFLICT(rowid) DO NOTHING", ()),
    ("marks.watermark", ()),
]  # fmt: skip
