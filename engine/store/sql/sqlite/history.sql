-- What history reads (engine/store/history/): one turn, lists, totals.

-- name: turn
-- One turn's row with its meta (a turn's detail, `History.turn`).
SELECT t.meta, t.id, t.thread_id, t.run_id, t.origin, t.channel, t.sender, t.text,
  t.strategy, t.status, t.reason, t.detail, t.rounds, t.input_tokens, t.output_tokens,
  t.final_text, t.created_at, t.updated_at, t.ended_at, (SELECT h.group_name FROM threads
  h WHERE h.id = t.thread_id) AS group_name, (SELECT count(*) FROM tool_calls c WHERE
  c.turn_id = t.id) AS calls, (SELECT count(*) FROM steps s WHERE s.turn_id = t.id) AS
  steps
  FROM turns t WHERE t.id = ?;

-- name: turn_instructions
-- What one turn was told (the hash it recorded, the parts kept under it) and what the turn
-- before it on its thread was told: a key lookup each (turns_thread for the one before,
-- walked in its own order: two turns opened at the same time are in the order written,
-- its rowid, so nothing is sorted), so a turn's detail says when the instructions changed.
SELECT t.instructions AS hash, i.parts AS parts, p.id AS previous_id,
  p.instructions AS previous
  FROM turns t
  LEFT JOIN instructions i ON i.hash = t.instructions
  LEFT JOIN turns p ON p.rowid = (SELECT q.rowid FROM turns q WHERE q.thread_id = t.thread_id
    AND (q.created_at, q.rowid) < (t.created_at, t.rowid)
    ORDER BY q.created_at DESC, q.rowid DESC LIMIT 1)
  WHERE t.id = ?;

-- name: turn_model
-- The model that answered one turn (`provider:model`), by its key; read only where
-- the room's turns have the column (a room an earlier release made has none).
SELECT t.model FROM turns t WHERE t.id = ?;

-- name: turn_usage
-- What one turn spent besides its tokens in and out (of the input, what the provider's
-- cache served; the cost of its priced tokens; its tokens that have no price), by its key;
-- read only where the room's turns have the columns (a room an earlier release made has none).
SELECT t.cached_tokens, t.cost, t.unpriced FROM turns t WHERE t.id = ?;

-- name: thread_usage
-- What a thread spent, all days together: the sums of its turns (each the sum of its
-- steps), walked by turns_thread; steps are its inferences (rounds).
SELECT sum(t.rounds) AS steps, sum(t.input_tokens) AS input_tokens,
  sum(t.output_tokens) AS output_tokens, sum(t.cached_tokens) AS cached_tokens,
  sum(t.cost) AS cost, sum(t.unpriced) AS unpriced
  FROM turns t WHERE t.thread_id = ?;

-- name: steps
SELECT * FROM steps WHERE turn_id = ? ORDER BY idx, id;

-- name: messages
SELECT * FROM messages WHERE turn_id = ? ORDER BY seq;

-- name: calls
SELECT * FROM tool_calls WHERE turn_id = ? ORDER BY step_id, idx;

-- name: runs
-- Runs below a cursor (started_at, id), newest first, with their turn counts.
SELECT r.*, (SELECT value FROM counters WHERE name = 'run:' || r.id) AS turns FROM runs r
  WHERE (r.started_at, r.id) < (?, ?) ORDER BY r.started_at DESC, r.id DESC LIMIT ?;

-- name: runs_unindexed
-- The same in a room whose database predates the counters.
SELECT r.*, 0 AS turns FROM runs r
  WHERE (r.started_at, r.id) < (?, ?) ORDER BY r.started_at DESC, r.id DESC LIMIT ?;

-- name: threads
-- Threads below a cursor (updated_at, id), most recently used first.
SELECT h.* FROM threads h WHERE (h.updated_at, h.id) < (?, ?)
  ORDER BY h.updated_at DESC, h.id DESC LIMIT ?;

-- name: group_threads
-- The same, of one group.
SELECT h.* FROM threads h WHERE h.group_name = ? AND (h.updated_at, h.id) < (?, ?)
  ORDER BY h.updated_at DESC, h.id DESC LIMIT ?;

-- name: turn_decisions
SELECT d.* FROM tool_calls c JOIN decisions d ON d.call_id = c.id WHERE c.turn_id = ?
  ORDER BY d.created_at, d.id;

-- name: suspended
SELECT count(*) FROM tool_calls WHERE status = 'suspended'
  AND status IN ('new', 'running', 'suspended', 'resuming');

-- name: counter_range
SELECT name, value FROM counters WHERE name >= ? AND name < ?;

-- name: turn_pruned
-- When retention pruned one turn and how many steps it had (issue 35), by its key; read
-- only where the room's turns have the columns (a room an earlier release made has none).
SELECT t.pruned_at, t.pruned_steps FROM turns t WHERE t.id = ?;

-- name: turn_origin
-- Where one turn's thread came from (a fork or a replay, issue 37), by the turn's key; no
-- row for a thread of its own. Read only where the room has the forks table.
SELECT f.* FROM turns t JOIN forks f ON f.thread_id = t.thread_id WHERE t.id = ?;

-- name: turn_forks
-- The threads made from one turn (forks of its steps, replays of it), oldest first, by
-- forks_from.
SELECT f.* FROM turns t JOIN forks f ON f.from_thread = t.thread_id AND f.from_turn = t.id
  WHERE t.id = ? ORDER BY f.made_at, f.thread_id;

-- name: fork_step
-- A step of a turn, its thread and how many entries the thread had when it ended (where a
-- fork of it cuts; NULL in a step made before forks: then by time, entries_until).
SELECT s.conv_upto, s.ended_at, t.thread_id FROM steps s JOIN turns t ON t.id = s.turn_id
  WHERE s.id = ? AND s.turn_id = ?;

-- name: entries_until
SELECT count(*) FROM messages WHERE thread_id = ? AND created_at <= ?;

-- name: entry_roles
-- A range of a thread's entries, only their roles (where a fork cuts, without their text).
SELECT seq, role FROM messages WHERE thread_id = ? AND seq >= ? AND seq < ? ORDER BY seq;

-- name: entries
-- A range of a thread's entries, whole.
SELECT seq, role, text, body FROM messages WHERE thread_id = ? AND seq >= ? AND seq < ?
  ORDER BY seq;
