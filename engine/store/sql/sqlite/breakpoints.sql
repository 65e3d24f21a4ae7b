-- name: made
INSERT INTO breakpoints(id, kind, tool, pattern, scope, thread_id, group_name, made_by, made_at, reason)
  VALUES (?,?,?,?,?,?,?,?,?,?);

-- name: removed
UPDATE breakpoints SET removed_at=?, removed_by=? WHERE id=? AND removed_at IS NULL;

-- name: hit
INSERT OR REPLACE INTO breakpoint_hits(call_id, breakpoint, at) VALUES (?,?,?);

-- name: hits
SELECT breakpoint, count(*) AS n, max(at) AS last FROM breakpoint_hits GROUP BY breakpoint;

-- name: live
SELECT * FROM breakpoints WHERE removed_at IS NULL ORDER BY made_at, id;
