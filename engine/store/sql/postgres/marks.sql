-- The marks tool calls give their turns, written by the once-a-second batch
-- (engine/store/index_batch.py, engine/store/pg/batch.py).

-- name: calls
-- Each unbatched call's marks on its turn: tool:<name> (a new call), is:failed,
-- is:denied (a call cancelled by a decision).
INSERT INTO turn_marks(mark, created_at, turn_id) SELECT 'tool:' || c.tool, t.created_at, t.id
  FROM tool_calls c JOIN turns t ON t.id = c.turn_id WHERE c.rowid > (SELECT value
  FROM counters WHERE name = 'marks:calls')
  UNION ALL SELECT (CASE WHEN c.status = 'failed' THEN 'is:failed' ELSE 'is:denied' END), t.created_at, t.id
  FROM (SELECT rowid FROM tool_calls WHERE rowid > (SELECT value FROM counters
  WHERE name = 'marks:calls') UNION ALL SELECT rowid FROM open_calls) u
  JOIN tool_calls c ON c.rowid = u.rowid JOIN turns t ON t.id = c.turn_id
  WHERE c.status = 'failed' OR (c.status = 'cancelled' AND EXISTS (SELECT 1
  FROM decisions d WHERE d.id = c.decision_id AND d.action = 'cancel'))
  ON CONFLICT DO NOTHING;

-- name: settled
-- open_calls loses the calls that have settled since.
DELETE FROM open_calls WHERE rowid IN (SELECT o.rowid FROM open_calls o
  JOIN tool_calls c ON c.rowid = o.rowid
  WHERE c.status NOT IN ('new', 'running', 'suspended', 'resuming'));

-- name: watermark
-- The watermark moves up to the last call.
UPDATE counters SET value = (SELECT coalesce(max(rowid), 0) FROM tool_calls)
  WHERE name = 'marks:calls';
