-- name: queued
INSERT INTO outbox(turn_id, thread_id, channel, reply, text, key, state, tries, next_at, created_at)
  VALUES (%s,%s,%s,%s,%s,%s,'pending',0,%s,%s) ON CONFLICT(key) DO NOTHING;

-- name: sent
UPDATE outbox SET state='sent', tries=%s, sent_at=%s, next_at=%s, last_error=NULL
  WHERE id=%s;

-- name: attempted
UPDATE outbox SET tries=%s WHERE id=%s AND state IN ('pending', 'retrying');

-- name: failed
UPDATE outbox SET state=%s, tries=%s, next_at=%s, last_error=%s WHERE id=%s
  AND state IN ('pending', 'retrying');

-- name: retried
UPDATE outbox SET state='pending', tries=0, next_at=%s WHERE id=%s AND state='dead';

-- name: dropped
UPDATE outbox SET state='dropped' WHERE id=%s AND state IN ('dead', 'retrying');

-- name: row
SELECT * FROM outbox WHERE id=%s;

-- name: counts
SELECT state, count(*) FROM outbox GROUP BY state;

-- name: due
-- Answers due by %s (each the oldest open one of its thread), of threads not in the JSON
-- list given, oldest due first.
SELECT o.* FROM outbox o WHERE o.state IN ('pending', 'retrying') AND NOT EXISTS (SELECT 1 FROM outbox p
  WHERE p.thread_id = o.thread_id AND p.state IN ('pending', 'retrying') AND p.id < o.id)
  AND o.next_at <= %s AND o.thread_id <> ALL(ARRAY(SELECT jsonb_array_elements_text(%s::jsonb)))
  ORDER BY o.next_at, o.id LIMIT %s;

-- name: next_due
-- When the next answer of a thread not in the JSON list given becomes due.
SELECT min(o.next_at) FROM outbox o WHERE o.state IN ('pending', 'retrying') AND NOT EXISTS (SELECT 1 FROM outbox p
  WHERE p.thread_id = o.thread_id AND p.state IN ('pending', 'retrying') AND p.id < o.id)
  AND o.thread_id <> ALL(ARRAY(SELECT jsonb_array_elements_text(%s::jsonb)));

-- name: listing
-- Answers in the states given (a JSON list), below an id, newest first.
SELECT * FROM outbox WHERE state = ANY(ARRAY(SELECT jsonb_array_elements_text(%s::jsonb))) AND id < %s
  ORDER BY id DESC LIMIT %s;
