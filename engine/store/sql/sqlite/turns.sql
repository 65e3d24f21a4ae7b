-- name: runs_crashed
UPDATE runs SET status='crashed', ended_at=? WHERE status='active';

-- name: run_started
INSERT INTO runs(id, kind, pid, started_at, status) VALUES (?,?,?,?,'active');

-- name: cancel_asked
INSERT OR IGNORE INTO cancels(turn_id, reason, asked_at) VALUES (?,?,?);

-- name: asked_cancel
SELECT reason FROM cancels WHERE turn_id=?;

-- name: run_ended
UPDATE runs SET status='ended', ended_at=? WHERE id=?;

-- name: last_step_id
SELECT coalesce(max(id), 0) FROM steps;

-- name: request_admitted
UPDATE turn_requests SET status='admitted', updated_at=? WHERE id=?;

-- name: thread_noted
INSERT INTO threads(id, group_name, created_at, updated_at, last_turn_id, turn_count)
  VALUES (?,?,?,?,?,1) ON CONFLICT(id) DO UPDATE
  SET updated_at=excluded.updated_at, last_turn_id=excluded.last_turn_id, turn_count=threads.turn_count+1;

-- name: turn_opened
INSERT INTO turns(id, thread_id, run_id, origin, channel, sender, text, meta, strategy, status, created_at, updated_at, instructions, model)
  VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?);

-- name: instructions_kept
INSERT OR IGNORE INTO instructions(hash, text, parts, created_at) VALUES (?,?,?,?);

-- name: instructions_of
SELECT text, parts FROM instructions WHERE hash=?;

-- name: thread_instructions
SELECT instructions, group_name FROM threads WHERE id=?;

-- name: thread_instructions_set
INSERT INTO threads(id, group_name, created_at, updated_at, turn_count, instructions)
  VALUES (?,?,?,?,0,?) ON CONFLICT(id) DO UPDATE SET instructions=excluded.instructions;

-- name: turn_changed
UPDATE turns
  SET status=?, reason=?, detail=?, rounds=?, input_tokens=?, output_tokens=?, cached_tokens=?, cost=?, unpriced=?, final_text=?, record=?, updated_at=?, ended_at=?
  WHERE id=?;

-- name: turn_row
SELECT t.*, h.group_name FROM turns t JOIN threads h ON h.id = t.thread_id WHERE t.id=?;

-- name: step_ended
INSERT INTO steps(id, turn_id, run_id, idx, kind, status, summary, started_at, ended_at, input_tokens, output_tokens, cached_tokens, cost, conv_upto)
  VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?);

-- name: call_inserted
INSERT INTO tool_calls(id, model_call_id, turn_id, thread_id, step_id, idx, tool, meta, created_at, args, status, result, error, suspend_reason, awaiting, decision_id, has_message, updated_at, ended_at)
  VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?);

-- name: call_changed
UPDATE tool_calls
  SET args=?, status=?, result=?, error=?, suspend_reason=?, awaiting=?, decision_id=?, has_message=?, updated_at=?, ended_at=?
  WHERE id=?;

-- name: call_meta_set
UPDATE tool_calls SET meta=json_set(meta, ?, json(?)) WHERE id=?;

-- name: call_rows
SELECT * FROM tool_calls WHERE turn_id=? ORDER BY step_id, idx;

-- name: awaiting
SELECT * FROM tool_calls WHERE status='suspended' AND awaiting=? ORDER BY updated_at, id;

-- name: call_row
SELECT * FROM tool_calls WHERE id=?;

-- name: message_appended
INSERT INTO messages(thread_id, turn_id, seq, role, text, body, created_at)
  VALUES (?, ?, ?, ?, ?, ?, ?);

-- name: message_edited
UPDATE messages SET text=?, body=? WHERE thread_id=? AND seq=?;

-- name: message_bodies
SELECT body FROM messages WHERE thread_id=? ORDER BY seq;

-- name: thread_opening
-- message_bodies and thread_instructions in one read: (0, seq, body, NULL) per message,
-- then (1, 0, instructions, group_name) if the thread has a row
SELECT 0 AS part, seq, body AS text, NULL AS grp FROM messages WHERE thread_id=?
UNION ALL SELECT 1, 0, instructions, group_name FROM threads WHERE id=?
ORDER BY part, seq;

-- name: checkpoint
INSERT INTO checkpoints(turn_id, run_id, kind, created_at) VALUES (?,?,?,?);

-- name: events
-- one row; `turns.events*N` inserts N
INSERT INTO events(at, run_id, thread_id, turn_id, kind, body)
  VALUES (?,?,?,?,?,?);
