-- What the projector reads of a room's truth for the bus (engine/store/bus.py).

-- name: top_seq
-- The id of the room's newest stored event (0: none).
SELECT coalesce(max(id), 0) FROM events;

-- name: public_events
-- The public events with an id in (after, upto], in order, a page at a time: a call's
-- only while it waits (its other states carry results, and are not news).
SELECT id, at, kind, thread_id, turn_id, body FROM events WHERE id > ? AND id <= ?
  AND kind IN ('turn_started', 'turn_changed', 'call_changed', 'decision_recorded', 'delivery_changed')
  AND (kind != 'call_changed' OR json_extract(body, '$.status') = 'suspended')
  ORDER BY id LIMIT ?;

-- name: turn_counts
-- Turns running and waiting.
SELECT status, count(*) FROM turns WHERE status != 'done' GROUP BY status;
