-- name: runs_crashed
UPDATE runs SET status='crashed', ended_at=%s WHERE status='active';

-- name: run_started
INSERT INTO runs(id, kind, pid, started_at, status) VALUES (%s,%s,%s,%s,'active');

-- name: cancel_asked
INSERT INTO cancels(turn_id, reason, asked_at) VALUES (%s,%s,%s) ON CONFLICT DO NOTHING;

-- name: asked_cancel
SELECT reason FROM cancels WHERE turn_id=%s;

-- name: run_ended
UPDATE runs SET status='ended', ended_at=%s WHERE id=%s;

-- name: last_step_id
SELECT coalesce(max(id), 0) FROM steps;

-- name: request_admitted
UPDATE turn_requests SET status='admitted', updated_at=%s WHERE id=%s;

-- name: thread_noted
INSERT INTO threads(id, group_name, created_at, updated_at, last_turn_id, turn_count)
  VALUES (%s,%s,%s,%s,%s,1) ON CONFLICT(id) DO UPDATE
  SET updated_at=excluded.updated_at, last_turn_id=excluded.last_turn_id, turn_count=threads.turn_count+1;

-- name: turn_opened
INSERT INTO turns(id, thread_id, run_id, origin, channel, sender, text, meta, strategy, status, created_at, updated_at, instructions, model)
  VALUES (%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s);

-- name: instructions_kept
INSERT INTO instructions(hash, text, parts, created_at) VALUES (%s,%s,%s,%s) ON CONFLICT DO NOTHING;

-- name: instructions_of
SELECT text, parts FROM instructions WHERE hash=%s;

-- name: thread_instructions
SELECT instructions, group_name FROM threads WHERE id=%s;

-- name: thread_instructions_set
INSERT INTO threads(id, group_name, created_at, updated_at, turn_count, instructions)
  VALUES (%s,%s,%s,%s,0,%s) ON CONFLICT(id) DO UPDATE SET instructions=excluded.instructions;

-- name: turn_changed
UPDATE turns
  SET status=%s, reason=%s, detail=%s, rounds=%s, input_tokens=%s, output_tokens=%s, cached_tokens=%s, cost=%s, unpriced=%s, final_text=%s, record=%s, updated_at=%s, ended_at=%s
  WHERE id=%s;

-- name: turn_row
SELECT t.*, h.group_name FROM turns t JOIN threads h ON h.id = t.thread_id WHERE t.id=%s;

-- name: step_ended
INSERT INTO steps(id, turn_id, run_id, idx, kind, status, summary, started_at, ended_at, input_tokens, output_tokens, cached_tokens, cost, conv_upto)
  VALUES (%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s);

-- name: call_inserted
INSERT INTO tool_calls(id, model_call_id, turn_id, thread_id, step_id, idx, tool, meta, created_at, args, status, result, error, suspend_reason, awaiting, decision_id, has_message, updated_at, ended_at)
  VALUES (%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s);

-- name: call_changed
UPDATE tool_calls
  SET args=%s, status=%s, result=%s, error=%s, suspend_reason=%s, awaiting=%s, decision_id=%s, has_message=%s, updated_at=%s, ended_at=%s
  WHERE id=%s;

-- name: call_meta_set
UPDATE tool_calls
  SET meta=(jsonb_set((replace((meta), '\u0000', '\ufffd'))::jsonb, string_to_array(substr(%s, 3), '.'), (replace((%s), '\u0000', '\ufffd'))::jsonb))::text
  WHERE id=%s;

-- name: call_rows
SELECT * FROM tool_calls WHERE turn_id=%s ORDER BY step_id, idx;

-- name: awaiting
SELECT * FROM tool_calls WHERE status='suspended' AND awaiting=%s
  ORDER BY updated_at, id;

-- name: call_row
SELECT * FROM tool_calls WHERE id=%s;

-- name: message_appended
INSERT INTO messages(thread_id, turn_id, seq, role, text, body, created_at)
  VALUES (%s, %s, %s, %s, %s, %s, %s);

-- name: message_edited
UPDATE messages SET text=%s, body=%s WHERE thread_id=%s AND seq=%s;

-- name: message_bodies
SELECT body FROM messages WHERE thread_id=%s ORDER BY seq;

-- name: thread_opening
-- message_bodies and thread_instructions in one read: (0, seq, body, NULL) per message,
-- then (1, 0, instructions, group_name) if the thread has a row
SELECT 0 AS part, seq, body AS text, NULL AS grp FROM messages WHERE thread_id=%s
UNION ALL SELECT 1, 0, instructions, group_name FROM threads WHERE id=%s
ORDER BY part, seq;

-- name: checkpoint
INSERT INTO checkpoints(turn_id, run_id, kind, created_at) VALUES (%s,%s,%s,%s);

-- name: events
-- one row; `turns.events*N` inserts N
INSERT INTO events(at, run_id, thread_id, turn_id, kind, body)
  VALUES (%s,%s,%s,%s,%s,%s);
