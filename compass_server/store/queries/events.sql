-- name: append_events
SELECT compass_append_events(%(kinds)s::text[], %(channel_ids)s::uuid[], %(payloads)s::jsonb[]) AS last_id

-- name: read_events
SELECT id, kind, channel_id, payload, created_at, size
FROM compass_read_events(%(after)s, %(limit)s, %(max_bytes)s)

-- name: last_event_id
SELECT last_event_id FROM event_counters WHERE workspace_id = compass_workspace()

-- name: read_lane_events
SELECT id, kind, channel_id, payload, created_at, size
FROM compass_read_lane_events(%(after)s, %(keys)s::uuid[], %(limit)s, %(max_bytes)s)

-- name: lanes_with_events
SELECT lane, head
FROM compass_lanes_with_events(%(afters)s::bigint[], %(lanes)s::integer[], %(keys)s::uuid[])
