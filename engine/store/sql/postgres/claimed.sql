-- The unfinished business of the threads a worker holds (a JSON list of thread ids).

-- name: turns
SELECT t.id, t.thread_id, t.status, h.group_name FROM turns t JOIN threads h
  ON h.id = t.thread_id WHERE t.status != 'done' AND t.thread_id = ANY(ARRAY(SELECT jsonb_array_elements_text(%s::jsonb)))
  ORDER BY t.created_at;

-- name: requests
SELECT * FROM turn_requests WHERE status='queued' AND thread_id = ANY(ARRAY(SELECT jsonb_array_elements_text(%s::jsonb)))
  ORDER BY created_at;

-- name: decisions
SELECT d.*, c.thread_id AS call_thread FROM decisions d JOIN tool_calls c
  ON c.id = d.call_id WHERE d.status='queued' AND c.thread_id = ANY(ARRAY(SELECT jsonb_array_elements_text(%s::jsonb)))
  ORDER BY d.created_at;
