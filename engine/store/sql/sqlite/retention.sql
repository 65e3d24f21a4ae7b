-- What retention reads and writes (engine/store/retention.py; engine/services/retention.py
-- says what a pruned turn keeps, table by table). A list of turns is a JSON array of ids.

-- name: candidates
-- Finished turns not pruned yet that ended before a time, after a (ended_at, id) cursor,
-- oldest first (turns_prunable), with no call still open.
SELECT t.id, t.thread_id, t.ended_at FROM turns t
  WHERE t.status = 'done' AND t.pruned_at IS NULL AND t.ended_at < ?
  AND (t.ended_at, t.id) > (?, ?)
  AND NOT EXISTS (SELECT 1 FROM tool_calls c WHERE c.turn_id = t.id
    AND c.status IN ('new', 'running', 'suspended', 'resuming'))
  ORDER BY t.ended_at, t.id LIMIT ?;

-- name: weights
-- Each listed turn's steps, calls and events, and about how many bytes pruning it frees:
-- its steps, events and checkpoints, its calls' results, metadata, the arguments no
-- decision names and the part of an error past its first 200 characters.
SELECT i.value AS turn_id,
  (SELECT count(*) FROM steps s WHERE s.turn_id = i.value) AS steps,
  (SELECT count(*) FROM tool_calls c WHERE c.turn_id = i.value) AS calls,
  (SELECT count(*) FROM events e WHERE e.turn_id = i.value) AS events,
  (SELECT coalesce(sum(64 + length(s.summary)), 0) FROM steps s WHERE s.turn_id = i.value)
  + (SELECT coalesce(sum(coalesce(length(c.result), 0) + length(c.meta)
      + max(coalesce(length(c.error), 0) - 200, 0)
      + iif(EXISTS (SELECT 1 FROM decisions d WHERE d.call_id = c.id), 0, length(c.args))), 0)
    FROM tool_calls c WHERE c.turn_id = i.value)
  + (SELECT coalesce(sum(48 + length(e.body)), 0) FROM events e WHERE e.turn_id = i.value)
  + (SELECT count(*) * 40 FROM checkpoints k WHERE k.turn_id = i.value) AS bytes
  FROM json_each(?) i;

-- name: event_ids
-- The ids (the bus's seqs) of the listed turns' events.
SELECT e.id FROM events e WHERE e.turn_id IN (SELECT value FROM json_each(?)) ORDER BY e.id;

-- name: markers
-- A thread's compaction markers and undos (system entries), in order.
SELECT seq, body FROM messages WHERE thread_id = ? AND role = 'system' ORDER BY seq;

-- name: outputs
-- The listed turns' tool results and assistant entries (what holds outputs and arguments).
SELECT m.id, m.thread_id, m.seq, m.role, m.body FROM messages m
  WHERE m.turn_id IN (SELECT value FROM json_each(?)) AND m.role IN ('tool', 'assistant')
  ORDER BY m.id;

-- name: turn_pruned
-- The summary row: when, and how many steps it had (first in the transaction).
UPDATE turns SET pruned_at = ?,
  pruned_steps = (SELECT count(*) FROM steps s WHERE s.turn_id = turns.id)
  WHERE id = ? AND status = 'done' AND pruned_at IS NULL;

-- name: calls_slimmed
-- A call keeps its row (what a decision names), its tool, status and times, the
-- arguments a decision names and the first 200 characters of its error.
UPDATE tool_calls SET result = NULL, error = substr(error, 1, 200), meta = '{}',
  args = iif(EXISTS (SELECT 1 FROM decisions d WHERE d.call_id = tool_calls.id), args, '')
  WHERE turn_id = ?;

-- name: steps_deleted
-- (never the newest step: step ids start again from it)
DELETE FROM steps WHERE turn_id = ? AND id < (SELECT max(id) FROM steps);

-- name: events_deleted
-- (never the newest event: the bus's projection counts from it)
DELETE FROM events WHERE turn_id = ? AND id < (SELECT max(id) FROM events);

-- name: checkpoints_deleted
DELETE FROM checkpoints WHERE turn_id = ?;

-- name: outbox_deleted
-- An answer sent or dropped (its key is its turn's id); one owed or dead stays.
DELETE FROM outbox WHERE key = ? AND state IN ('sent', 'dropped');

-- name: message_slimmed
UPDATE messages SET text = ?, body = ? WHERE id = ?;
