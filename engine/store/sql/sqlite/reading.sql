-- name: running_calls
SELECT count(*) FROM tool_calls WHERE status = 'running';
