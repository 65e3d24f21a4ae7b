-- name: insert
INSERT INTO decisions(id, call_id, action, args, result, use_result, reason, remember, decided_by, status, note, created_at, pattern, args_hash, sandbox)
  VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?);

-- name: applied
UPDATE decisions SET status='applied', applied_at=? WHERE id=? AND status='queued';

-- name: duplicate
UPDATE decisions SET status='duplicate', note=? WHERE id=? AND status='queued';

-- name: left_queued
UPDATE decisions SET status='duplicate', note=? WHERE call_id=? AND status='queued';

-- name: superseded
UPDATE decisions SET status='superseded', note=?, applied_at=? WHERE id=? AND status='queued';

-- name: refused
UPDATE decisions SET status='refused', note=?, applied_at=? WHERE id=? AND status='queued';

-- name: exists
SELECT 1 FROM decisions WHERE id=?;

-- name: load
SELECT * FROM decisions WHERE id=?;

-- name: queued
SELECT * FROM decisions WHERE status='queued' ORDER BY created_at;

-- name: turns_with_queued
SELECT DISTINCT c.turn_id FROM decisions d JOIN tool_calls c ON c.id = d.call_id
  WHERE d.status='queued' AND c.status='suspended' ORDER BY c.turn_id;
