-- name: groups
SELECT * FROM thread_groups;

-- name: open_turns
SELECT t.id, t.thread_id, t.status, h.group_name FROM turns t
  JOIN threads h ON h.id = t.thread_id WHERE t.status != 'done' ORDER BY t.created_at;

-- name: queued_requests
SELECT * FROM turn_requests WHERE status='queued' ORDER BY created_at;

-- name: stored_request
SELECT * FROM turn_requests WHERE id = %s;

-- name: keyed_request
SELECT r.* FROM request_keys k JOIN turn_requests r ON r.id = k.request_id
  WHERE k.key = %s;

-- name: coalesced_into
SELECT coalesced_into FROM turn_requests WHERE id = %s AND status = 'coalesced';

-- name: key_row
INSERT INTO request_keys(key, request_id, created_at) VALUES (%s,%s,%s);

-- name: request_row
INSERT INTO turn_requests(id, thread_id, group_name, message, strategy, status, reason, coalesced_into, created_at, updated_at)
  VALUES (%s,%s,%s,%s,%s,%s,%s,%s,%s,%s) ON CONFLICT(id) DO UPDATE
  SET status=excluded.status, reason=excluded.reason, coalesced_into=excluded.coalesced_into, updated_at=excluded.updated_at;

-- name: group_row
INSERT INTO thread_groups(name, priority, max_running_turns, max_queued_turns, overflow_policy, coalesce, paused)
  VALUES (%s,%s,%s,%s,%s,%s,%s) ON CONFLICT(name) DO UPDATE
  SET priority=excluded.priority, max_running_turns=excluded.max_running_turns, max_queued_turns=excluded.max_queued_turns, overflow_policy=excluded.overflow_policy, coalesce=excluded.coalesce, paused=excluded.paused;
