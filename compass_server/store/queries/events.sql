-- name: append_events
SELECT compass_append_events(%(kinds)s::text[], %(channel_ids)s::uuid[], %(payloads)s::jsonb[]) AS last_id

-- name: read_events
SELECT id, kind, channel_id, payload, created_at, octet_length(payload::text) AS size
FROM events
WHERE id > %(after)s ORDER BY id LIMIT %(limit)s

-- name: last_event_id
SELECT last_event_id FROM event_counters WHERE workspace_id = compass_workspace()
