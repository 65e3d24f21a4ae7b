-- name: made
INSERT INTO forks(thread_id, kind, from_thread, from_turn, from_step, upto, edited, group_name, made_by, made_at)
  VALUES (?,?,?,?,?,?,?,?,?,?);

-- name: of_thread
SELECT * FROM forks WHERE thread_id=?;

-- name: from_thread
SELECT * FROM forks WHERE from_thread=? ORDER BY made_at, thread_id;

-- name: step
SELECT s.id, s.kind, s.conv_upto, s.ended_at, t.thread_id, t.id AS turn_id
  FROM steps s JOIN turns t ON t.id = s.turn_id WHERE s.id=? AND s.turn_id=?;

-- name: entries_until
SELECT count(*) FROM messages WHERE thread_id=? AND created_at <= ?;

-- name: turn_start
SELECT min(seq) FROM messages WHERE turn_id=?;

-- name: bodies
SELECT seq, body FROM messages WHERE thread_id=? AND seq < ? ORDER BY seq;

-- name: turn_calls
SELECT tool, args, status, result, error FROM tool_calls
  WHERE turn_id=? AND tool != 'breakpoint' ORDER BY step_id, idx;
