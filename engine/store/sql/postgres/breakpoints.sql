-- name: made
INSERT INTO breakpoints(id, kind, tool, pattern, scope, thread_id, group_name, made_by, made_at, reason)
  VALUES (%s,%s,%s,%s,%s,%s,%s,%s,%s,%s);

-- name: removed
UPDATE breakpoints SET removed_at=%s, removed_by=%s WHERE id=%s AND removed_at IS NULL;

-- name: hit
INSERT INTO breakpoint_hits(call_id, breakpoint, at) VALUES (%s,%s,%s)
  ON CONFLICT (call_id, breakpoint) DO UPDATE SET at = excluded.at;

-- name: hits
SELECT breakpoint, count(*) AS n, max(at) AS last FROM breakpoint_hits GROUP BY breakpoint;

-- name: live
SELECT * FROM breakpoints WHERE removed_at IS NULL ORDER BY made_at, id;
