"""The once-a-second batch: full-text indexing, and the marks tool calls give their turns.

Neither is done in a step's transaction. An FTS5 write costs more than the rest of a
checkpoint together, and the marks and queue rows that triggers on `tool_calls` used to
write cost half of a checkpoint's statements (issue 16). So a step writes its calls and
nothing else; the batch (`Store.index`, about once a second, and when the room opens and
closes) reads what changed since the last one and brings `turn_marks`, `counters` and the
full-text indexes up to date, in one transaction.

What changed since the last batch, without a trigger on the step: calls above the
watermark `counters['marks:calls']` (the highest `tool_calls` rowid the batch has seen;
calls are append-only), and the calls in `open_calls` (those the batch saw not yet settled:
only they can still change). `open_calls` also keeps the text the batch indexed for a
suspended call, which FTS5 needs to take it out again when the call moves on.

The statements are SQLite's own (FTS5 is), except the marks, which the batch on
PostgreSQL runs too (`marks.*` in engine/store/sql/). History reads the same definition (`UNBATCHED`, `engine.store.history.pending`) to count
and filter by what is committed but not yet batched, so its filters and totals are exact.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

WATERMARK = "(SELECT value FROM counters WHERE name = 'marks:calls')"
OPEN = "('new', 'running', 'suspended', 'resuming')"  # a call that may still change
UNINDEXABLE = "('new', 'running', 'resuming')"  # a call the full-text index leaves out
DENIED = "EXISTS (SELECT 1 FROM decisions d WHERE d.id = c.decision_id AND d.action = 'cancel')"

# The calls the batch has not settled: above the watermark, or open when it last ran. The
# two parts never overlap (open_calls holds only rowids at or below the watermark).
UNBATCHED = f"(SELECT rowid FROM tool_calls WHERE rowid > {WATERMARK} UNION ALL SELECT rowid FROM open_calls)"  # fmt: skip


# A suspended call indexed by the last batch, unchanged since (its copy in open_calls).
_SAME = (
    "o.indexed = 1 AND c.status = 'suspended' AND c.args IS o.args"
    " AND c.result IS o.result AND c.error IS o.error"
)

INDEX_BATCH: list[tuple[str, Sequence[Any]]] = [
    # Messages (append-only) up to the watermark counters['fts:messages'].
    ("INSERT INTO messages_fts(rowid, text) SELECT id, text FROM messages"
     " WHERE id > (SELECT value FROM counters WHERE name = 'fts:messages')"
     " AND role != 'tool' AND text != ''", ()),
    ("UPDATE counters SET value = (SELECT coalesce(max(id), 0) FROM messages)"
     " WHERE name = 'fts:messages'", ()),
    # Old text out: what the triggers on a settled call's edit or delete left, and the
    # text of a suspended call indexed last time that has moved on since.
    ("INSERT INTO calls_fts(calls_fts, rowid, args, result, error)"
     " SELECT 'delete', call_rowid, args, result, error FROM fts_unindex ORDER BY id", ()),
    ("DELETE FROM fts_unindex", ()),
    ("INSERT INTO calls_fts(calls_fts, rowid, args, result, error)"
     " SELECT 'delete', o.rowid, o.args, o.result, o.error FROM open_calls o"
     f" CROSS JOIN tool_calls c ON c.rowid = o.rowid WHERE o.indexed = 1 AND NOT ({_SAME})", ()),
    # New text in: unbatched calls that are settled or suspended (but not one whose text
    # is in already, nor one queued, which the next statement indexes).
    ("INSERT INTO calls_fts(rowid, args, result, error)"
     " SELECT c.rowid, c.args, c.result, c.error FROM tool_calls c"
     f" WHERE c.rowid > {WATERMARK} AND c.status NOT IN {UNINDEXABLE}"
     " AND NOT EXISTS (SELECT 1 FROM fts_queue q WHERE q.rowid = c.rowid)"
     " UNION ALL"
     " SELECT c.rowid, c.args, c.result, c.error FROM open_calls o"
     f" CROSS JOIN tool_calls c ON c.rowid = o.rowid WHERE c.status NOT IN {UNINDEXABLE}"
     f" AND NOT ({_SAME}) AND NOT EXISTS (SELECT 1 FROM fts_queue q WHERE q.rowid = c.rowid)",
     ()),
    # The queue: filled only by hand, to refill the index (schema.sql says how), and by
    # rooms made before issue 16, whose triggers queued calls.
    ("INSERT INTO calls_fts(rowid, args, result, error)"
     " SELECT c.rowid, c.args, c.result, c.error FROM fts_queue q"
     f" CROSS JOIN tool_calls c ON c.rowid = q.rowid WHERE c.status NOT IN {UNINDEXABLE}", ()),
    ("DELETE FROM fts_queue", ()),
    # Marks, before open_calls moves on (they read it).
    ("marks.calls", ()),
    # open_calls becomes the unbatched calls still open, with the text now indexed for the
    # suspended ones; then the watermark moves up.
    ("marks.settled", ()),
    ("INSERT INTO open_calls(rowid, indexed, args, result, error)"
     " SELECT c.rowid, c.status = 'suspended', iif(c.status = 'suspended', c.args, NULL),"
     " iif(c.status = 'suspended', c.result, NULL), iif(c.status = 'suspended', c.error, NULL)"
     f" FROM {UNBATCHED} u CROSS JOIN tool_calls c ON c.rowid = u.rowid WHERE c.status IN {OPEN}"
     " ON CONFLICT(rowid) DO UPDATE SET indexed = excluded.indexed, args = excluded.args,"
     " result = excluded.result, error = excluded.error", ()),
    ("marks.watermark", ()),
]  # fmt: skip
