-- name: insert_workspace
-- The operator's, as compass_maintenance scoped to the new workspace.
WITH ws AS (INSERT INTO workspaces (id, name) VALUES (%(id)s, %(name)s) RETURNING id)
INSERT INTO event_counters (workspace_id) SELECT id FROM ws

-- name: get_account
SELECT id, workspace_id, handle, kind, owner_id, parent_id FROM accounts WHERE id = %(id)s

-- name: accounts_by_id
SELECT id, workspace_id, handle, kind, owner_id, parent_id FROM accounts WHERE id = ANY(%(ids)s::uuid[])

-- name: runner_agents
SELECT a.id, a.handle FROM runner_agents ra JOIN accounts a ON a.id = ra.agent_id
WHERE ra.runner_id = %(runner_id)s ORDER BY a.handle

-- name: set_status
UPDATE accounts SET status = %(status)s, status_text = %(status_text)s
WHERE id = %(id)s AND kind = 'agent'
RETURNING id

-- name: refresh_presence
SELECT compass_refresh_presence(%(agent_id)s) AS changed

-- name: presence_change
SELECT compass_presence_change(%(agent_id)s) AS change

-- name: presence_of
SELECT id, presence_state, presence_text FROM accounts
WHERE kind = 'agent' AND (cardinality(%(ids)s::uuid[]) = 0 OR id = ANY(%(ids)s::uuid[]))
ORDER BY handle
