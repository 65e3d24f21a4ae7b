-- name: turn
SELECT * FROM turns WHERE id=?;

-- name: calls
SELECT id, tool, args, status, suspend_reason, awaiting FROM tool_calls WHERE turn_id=?
  ORDER BY step_id, idx;

-- name: pending
SELECT c.id, c.turn_id, c.thread_id, c.tool, c.args, c.suspend_reason, c.awaiting, c.updated_at, h.group_name
  FROM tool_calls c LEFT JOIN threads h ON h.id = c.thread_id WHERE c.status='suspended'
  ORDER BY c.updated_at, c.id;
