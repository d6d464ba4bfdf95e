-- name: insert_session
INSERT INTO agent_sessions (id, workspace_id, agent_id, runner_id, server_id)
VALUES (%(id)s, compass_workspace(), %(agent_id)s, %(runner_id)s, %(server_id)s)

-- name: end_session
SELECT compass_end_session(%(server_id)s, %(id)s) AS moved

-- name: acked_cursor
INSERT INTO delivery_cursors (agent_id, workspace_id) VALUES (%(agent_id)s, compass_workspace())
ON CONFLICT (agent_id) DO UPDATE SET agent_id = excluded.agent_id
RETURNING acked_event_id

-- name: ack
UPDATE delivery_cursors SET acked_event_id = greatest(acked_event_id, %(event_id)s)
WHERE agent_id = %(agent_id)s
RETURNING acked_event_id

-- name: heartbeat
INSERT INTO servers (id) VALUES (%(id)s)
ON CONFLICT (id) DO UPDATE SET heartbeat_at = now()
RETURNING (xmax = 0) AS inserted

-- name: remove_server
DELETE FROM servers WHERE id = %(id)s

-- name: end_server_sessions
SELECT workspace_id, agent_id FROM compass_end_server_sessions(%(id)s)

-- name: save_cursors
SELECT compass_save_cursors(%(agent_ids)s::uuid[], %(event_ids)s::bigint[])

-- name: reap_stale_sessions
SELECT workspace_id, agent_id FROM compass_reap_stale_sessions(%(stale)s)
