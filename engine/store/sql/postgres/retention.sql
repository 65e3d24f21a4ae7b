-- What retention reads and writes (engine/store/retention.py; engine/services/retention.py
-- says what a pruned turn keeps, table by table). A list of turns is a JSON array of ids.

-- name: candidates
SELECT t.id, t.thread_id, t.ended_at FROM turns t
  WHERE t.status = 'done' AND t.pruned_at IS NULL AND t.ended_at < %s
  AND (t.ended_at, t.id) > (%s, %s)
  AND NOT EXISTS (SELECT 1 FROM tool_calls c WHERE c.turn_id = t.id
    AND c.status IN ('new', 'running', 'suspended', 'resuming'))
  ORDER BY t.ended_at, t.id LIMIT %s;

-- name: weights
-- (sizes as stored: pg_column_size counts a compressed value compressed, as the
-- measure of `gb` does, engine/store/pg/space.py)
SELECT i.id AS turn_id,
  (SELECT count(*) FROM steps s WHERE s.turn_id = i.id) AS steps,
  (SELECT count(*) FROM tool_calls c WHERE c.turn_id = i.id) AS calls,
  (SELECT count(*) FROM events e WHERE e.turn_id = i.id) AS events,
  (SELECT coalesce(sum(64 + pg_column_size(s.summary)), 0) FROM steps s WHERE s.turn_id = i.id)
  + (SELECT coalesce(sum(coalesce(pg_column_size(c.result), 0) + pg_column_size(c.meta)
      + greatest(coalesce(pg_column_size(c.error), 0) - 200, 0)
      + CASE WHEN EXISTS (SELECT 1 FROM decisions d WHERE d.call_id = c.id) THEN 0
        ELSE pg_column_size(c.args) END), 0)
    FROM tool_calls c WHERE c.turn_id = i.id)
  + (SELECT coalesce(sum(48 + pg_column_size(e.body)), 0) FROM events e WHERE e.turn_id = i.id)
  + (SELECT count(*) * 40 FROM checkpoints k WHERE k.turn_id = i.id) AS bytes
  FROM jsonb_array_elements_text(%s::jsonb) AS i(id);

-- name: event_ids
SELECT e.id FROM events e
  WHERE e.turn_id = ANY(ARRAY(SELECT jsonb_array_elements_text(%s::jsonb))) ORDER BY e.id;

-- name: markers
SELECT seq, body FROM messages WHERE thread_id = %s AND role = 'system' ORDER BY seq;

-- name: outputs
SELECT m.id, m.thread_id, m.seq, m.role, m.body FROM messages m
  WHERE m.turn_id = ANY(ARRAY(SELECT jsonb_array_elements_text(%s::jsonb)))
  AND m.role IN ('tool', 'assistant') ORDER BY m.id;

-- name: turn_pruned
UPDATE turns SET pruned_at = %s,
  pruned_steps = (SELECT count(*) FROM steps s WHERE s.turn_id = turns.id)
  WHERE id = %s AND status = 'done' AND pruned_at IS NULL;

-- name: calls_slimmed
UPDATE tool_calls SET result = NULL, error = substr(error, 1, 200), meta = '{}',
  args = CASE WHEN EXISTS (SELECT 1 FROM decisions d WHERE d.call_id = tool_calls.id)
    THEN args ELSE '' END
  WHERE turn_id = %s;

-- name: steps_deleted
DELETE FROM steps WHERE turn_id = %s AND id < (SELECT max(id) FROM steps);

-- name: events_deleted
DELETE FROM events WHERE turn_id = %s AND id < (SELECT max(id) FROM events);

-- name: checkpoints_deleted
DELETE FROM checkpoints WHERE turn_id = %s;

-- name: outbox_deleted
DELETE FROM outbox WHERE key = %s AND state IN ('sent', 'dropped');

-- name: message_slimmed
UPDATE messages SET text = %s, body = %s WHERE id = %s;
