-- name: added
INSERT INTO usage(day, group_name, thread_id, model, steps, input_tokens, output_tokens, cached_tokens, cost, unpriced)
  VALUES (?,?,?,?,1,?,?,?,?,?)
  ON CONFLICT(day, group_name, thread_id, model) DO UPDATE SET
  steps=usage.steps+1, input_tokens=usage.input_tokens+excluded.input_tokens,
  output_tokens=usage.output_tokens+excluded.output_tokens,
  cached_tokens=usage.cached_tokens+excluded.cached_tokens, cost=usage.cost+excluded.cost,
  unpriced=usage.unpriced+excluded.unpriced;

-- name: of_day
SELECT group_name, thread_id, sum(steps) AS steps, sum(input_tokens) AS input_tokens, sum(output_tokens) AS output_tokens, sum(cached_tokens) AS cached_tokens, sum(cost) AS cost, sum(unpriced) AS unpriced
  FROM usage WHERE day=? GROUP BY group_name, thread_id;

-- name: groups_of_day
SELECT group_name, sum(steps) AS steps, sum(input_tokens) AS input_tokens, sum(output_tokens) AS output_tokens, sum(cached_tokens) AS cached_tokens, sum(cost) AS cost, sum(unpriced) AS unpriced
  FROM usage WHERE day=? GROUP BY group_name;

-- name: spent
SELECT 'room' AS scope, sum(steps) AS steps, sum(input_tokens) AS input_tokens, sum(output_tokens) AS output_tokens, sum(cached_tokens) AS cached_tokens, sum(cost) AS cost, sum(unpriced) AS unpriced FROM usage WHERE day=?
UNION ALL
SELECT 'group' AS scope, sum(steps) AS steps, sum(input_tokens) AS input_tokens, sum(output_tokens) AS output_tokens, sum(cached_tokens) AS cached_tokens, sum(cost) AS cost, sum(unpriced) AS unpriced FROM usage WHERE day=? AND group_name=?
UNION ALL
SELECT 'thread' AS scope, sum(steps) AS steps, sum(input_tokens) AS input_tokens, sum(output_tokens) AS output_tokens, sum(cached_tokens) AS cached_tokens, sum(cost) AS cost, sum(unpriced) AS unpriced FROM usage WHERE day=? AND thread_id=?;

-- name: by_day
SELECT day AS key, sum(steps) AS steps, sum(input_tokens) AS input_tokens, sum(output_tokens) AS output_tokens, sum(cached_tokens) AS cached_tokens, sum(cost) AS cost, sum(unpriced) AS unpriced FROM usage WHERE day>=? AND day<=? GROUP BY day ORDER BY day DESC;

-- name: by_group
SELECT group_name AS key, sum(steps) AS steps, sum(input_tokens) AS input_tokens, sum(output_tokens) AS output_tokens, sum(cached_tokens) AS cached_tokens, sum(cost) AS cost, sum(unpriced) AS unpriced FROM usage WHERE day>=? AND day<=? GROUP BY group_name ORDER BY sum(cost) DESC, sum(input_tokens + output_tokens) DESC, group_name;

-- name: by_thread
SELECT thread_id AS key, sum(steps) AS steps, sum(input_tokens) AS input_tokens, sum(output_tokens) AS output_tokens, sum(cached_tokens) AS cached_tokens, sum(cost) AS cost, sum(unpriced) AS unpriced FROM usage WHERE day>=? AND day<=? GROUP BY thread_id ORDER BY sum(cost) DESC, sum(input_tokens + output_tokens) DESC, thread_id LIMIT ?;

-- name: by_model
SELECT model AS key, sum(steps) AS steps, sum(input_tokens) AS input_tokens, sum(output_tokens) AS output_tokens, sum(cached_tokens) AS cached_tokens, sum(cost) AS cost, sum(unpriced) AS unpriced FROM usage WHERE day>=? AND day<=? GROUP BY model ORDER BY sum(cost) DESC, sum(input_tokens + output_tokens) DESC, model;

-- name: total
SELECT '' AS key, sum(steps) AS steps, sum(input_tokens) AS input_tokens, sum(output_tokens) AS output_tokens, sum(cached_tokens) AS cached_tokens, sum(cost) AS cost, sum(unpriced) AS unpriced FROM usage WHERE day>=? AND day<=?;

-- name: of_thread
SELECT '' AS key, sum(steps) AS steps, sum(input_tokens) AS input_tokens, sum(output_tokens) AS output_tokens, sum(cached_tokens) AS cached_tokens, sum(cost) AS cost, sum(unpriced) AS unpriced FROM usage WHERE thread_id=?;

-- name: budgets
SELECT scope, tokens, cost, set_by, set_at FROM budgets ORDER BY scope;

-- name: budget_set
INSERT INTO budgets(scope, tokens, cost, set_by, set_at) VALUES (?,?,?,?,?)
  ON CONFLICT(scope) DO UPDATE SET tokens=excluded.tokens, cost=excluded.cost,
  set_by=excluded.set_by, set_at=excluded.set_at;

-- name: budget_cleared
DELETE FROM budgets WHERE scope=?;
