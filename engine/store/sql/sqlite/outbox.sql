-- name: queued
INSERT INTO outbox(turn_id, thread_id, channel, reply, text, key, state, tries, next_at, created_at)
  VALUES (?,?,?,?,?,?,'pending',0,?,?) ON CONFLICT(key) DO NOTHING;

-- name: sent
UPDATE outbox SET state='sent', tries=?, sent_at=?, next_at=?, last_error=NULL
  WHERE id=?;

-- name: attempted
UPDATE outbox SET tries=? WHERE id=? AND state IN ('pending', 'retrying');

-- name: failed
UPDATE outbox SET state=?, tries=?, next_at=?, last_error=? WHERE id=?
  AND state IN ('pending', 'retrying');

-- name: retried
UPDATE outbox SET state='pending', tries=0, next_at=? WHERE id=? AND state='dead';

-- name: dropped
UPDATE outbox SET state='dropped' WHERE id=? AND state IN ('dead', 'retrying');

-- name: row
SELECT * FROM outbox WHERE id=?;

-- name: counts
SELECT state, count(*) FROM outbox GROUP BY state;

-- name: due
-- Answers due by ? (each the oldest open one of its thread), of threads not in the JSON
-- list given, oldest due first.
SELECT o.* FROM outbox o WHERE o.state IN ('pending', 'retrying') AND NOT EXISTS (SELECT 1 FROM outbox p
  WHERE p.thread_id = o.thread_id AND p.state IN ('pending', 'retrying') AND p.id < o.id)
  AND o.next_at <= ? AND o.thread_id NOT IN (SELECT value FROM json_each(?))
  ORDER BY o.next_at, o.id LIMIT ?;

-- name: next_due
-- When the next answer of a thread not in the JSON list given becomes due.
SELECT min(o.next_at) FROM outbox o WHERE o.state IN ('pending', 'retrying') AND NOT EXISTS (SELECT 1 FROM outbox p
  WHERE p.thread_id = o.thread_id AND p.state IN ('pending', 'retrying') AND p.id < o.id)
  AND o.thread_id NOT IN (SELECT value FROM json_each(?));

-- name: listing
-- Answers in the states given (a JSON list), below an id, newest first.
SELECT * FROM outbox WHERE state IN (SELECT value FROM json_each(?)) AND id < ?
  ORDER BY id DESC LIMIT ?;
