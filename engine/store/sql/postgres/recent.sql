-- name: threads
SELECT id FROM threads ORDER BY updated_at DESC, id;

-- name: turns
SELECT *
  FROM (SELECT t.id, t.thread_id, t.status, t.reason, t.created_at, t.text, t.channel, t.sender, h.group_name
  FROM turns t LEFT JOIN threads h ON h.id = t.thread_id
  ORDER BY t.created_at DESC, t.id DESC LIMIT %s) AS r ORDER BY created_at, id;

-- name: steps
SELECT *
  FROM (SELECT s.id, s.turn_id, t.thread_id, s.kind, s.status, s.summary, s.started_at, s.ended_at, h.group_name, t.channel
  FROM steps s JOIN turns t ON t.id = s.turn_id LEFT
  JOIN threads h ON h.id = t.thread_id ORDER BY s.id DESC LIMIT %s) AS r ORDER BY id;

-- name: conversation
SELECT seq, role, text, turn_id FROM messages WHERE thread_id=%s ORDER BY seq DESC
  LIMIT %s;

-- name: calls
-- The calls of the turns given (a JSON list of ids), and every suspended call.
SELECT * FROM tool_calls
  WHERE turn_id = ANY(ARRAY(SELECT jsonb_array_elements_text(%s::jsonb))) OR status='suspended'
  ORDER BY updated_at, id;

-- name: turn_ends
-- How the turns given (a JSON list of ids) ended, and the first message of each.
SELECT t.id, t.status, t.reason, t.detail, t.channel, t.sender,
  (SELECT MIN(m.seq) FROM messages m WHERE m.turn_id = t.id) AS first_seq
  FROM turns t WHERE t.id = ANY(ARRAY(SELECT jsonb_array_elements_text(%s::jsonb)));
