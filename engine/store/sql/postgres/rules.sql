-- name: made
INSERT INTO rules(id, tool, effect, scope, thread_id, decision_id, created_at, pattern, made_by, expires_at, reason)
  VALUES (%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s);

-- name: revoked
UPDATE rules SET revoked_at=%s, revoked_by=%s WHERE id=%s AND revoked_at IS NULL;

-- name: used
INSERT INTO rule_calls(call_id, rule, effect, at) VALUES (%s,%s,%s,%s)
  ON CONFLICT (call_id) DO UPDATE
  SET rule = excluded.rule, effect = excluded.effect, at = excluded.at;

-- name: uses
SELECT rule, count(*) AS n, max(at) AS last FROM rule_calls GROUP BY rule;

-- name: live
SELECT * FROM rules WHERE revoked_at IS NULL ORDER BY id;

-- name: last_id
SELECT coalesce(max(id), 0) FROM rules;

-- name: revocation
SELECT revoked_at, revoked_by FROM rules WHERE id=%s AND revoked_at IS NOT NULL;
