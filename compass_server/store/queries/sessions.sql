-- name: bind_session
-- The runner's assignment, held until the bind commits (an unassignment waits
-- for it, then removes the session it bound); the session; and the agent's
-- delivery cursor, made on its first bind. No row: the agent is not the
-- runner's, and nothing was written.
WITH assigned AS (
  SELECT ra.agent_id FROM runner_agents ra
  WHERE ra.runner_id = %(runner_id)s AND ra.agent_id = %(agent_id)s
  FOR KEY SHARE
), bound AS (
  INSERT INTO agent_sessions (id, workspace_id, agent_id, runner_id, server_id)
  SELECT %(id)s, compass_workspace(), a.agent_id, %(runner_id)s, %(server_id)s FROM assigned a
  RETURNING agent_id
)
INSERT INTO delivery_cursors (agent_id, workspace_id)
SELECT b.agent_id, compass_workspace() FROM bound b
ON CONFLICT (agent_id) DO UPDATE SET agent_id = excluded.agent_id
RETURNING acked_event_id

-- name: end_session
SELECT compass_end_session(%(server_id)s, %(id)s) AS moved

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
