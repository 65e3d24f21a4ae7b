-- The room's decision audit (engine/store/audit.py): each kind of entry read on its own,
-- oldest first from a position (time, key) on, so a page walks one index and sorts nothing;
-- the two are merged by the caller. An optional filter is NULL when not given. Keys compare
-- byte by byte (COLLATE "C", as the indexes do): the order Python merges them in, whatever
-- the database's own collation.

-- name: decisions
-- Decisions from (created_at, id) on, by decisions_time, with their call's turn, thread
-- and tool (by its key; a decision naming no known call has none).
SELECT d.id, d.call_id, d.action, d.decided_by, d.status, d.note, d.reason, d.remember,
  d.pattern, d.args_hash, d.sandbox, d.created_at, d.applied_at,
  d.args IS NOT NULL AS edited, d.use_result, c.turn_id, c.thread_id, c.tool
  FROM decisions d LEFT JOIN tool_calls c ON c.id = d.call_id
  WHERE (d.created_at, d.id COLLATE "C") >= (%s, %s)
    AND (CAST(%s AS TEXT) IS NULL OR c.thread_id = %s)
    AND (CAST(%s AS TEXT) IS NULL OR d.decided_by = %s)
  ORDER BY d.created_at, d.id COLLATE "C" LIMIT %s;

-- name: rules
-- Rules' verdicts at the gate from (at, call_id) on, by rule_calls_time, each named as an
-- operator reads it (`rule 12`; `agentdeck.toml rule <fingerprint>`), with the rule of
-- the database it was (pattern, reason, who made it: by its key) and the call's turn,
-- thread and tool.
SELECT r.call_id, r.rule, r.effect, r.at,
  CASE WHEN substr(r.rule, 1, 3) = 'db:' THEN 'rule ' || substr(r.rule, 4)
       WHEN substr(r.rule, 1, 5) = 'toml:' THEN 'agentdeck.toml rule ' || substr(r.rule, 6)
       ELSE 'rule ' || r.rule END AS decided_by,
  u.pattern, u.reason, u.made_by, u.decision_id, c.turn_id, c.thread_id, c.tool
  FROM rule_calls r LEFT JOIN tool_calls c ON c.id = r.call_id
  LEFT JOIN rules u ON u.id = CASE WHEN r.rule ~ '^db:[0-9]{1,18}$'
    THEN CAST(substr(r.rule, 4) AS BIGINT) END
  WHERE (r.at, r.call_id COLLATE "C") >= (%s, %s)
    AND (CAST(%s AS TEXT) IS NULL OR c.thread_id = %s)
    AND (CAST(%s AS TEXT) IS NULL OR CASE WHEN substr(r.rule, 1, 3) = 'db:' THEN 'rule ' || substr(r.rule, 4)
       WHEN substr(r.rule, 1, 5) = 'toml:' THEN 'agentdeck.toml rule ' || substr(r.rule, 6)
       ELSE 'rule ' || r.rule END = %s)
  ORDER BY r.at, r.call_id COLLATE "C" LIMIT %s;
