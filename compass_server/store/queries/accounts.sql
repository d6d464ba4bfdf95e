-- name: insert_workspace
WITH ws AS (INSERT INTO workspaces (id, name) VALUES (%(id)s, %(name)s) RETURNING id)
INSERT INTO event_counters (workspace_id) SELECT id FROM ws

-- name: insert_account
INSERT INTO accounts (id, workspace_id, handle, kind, owner_id)
VALUES (%(id)s, compass_workspace(), %(handle)s, %(kind)s, %(owner_id)s)

-- name: get_account
SELECT id, workspace_id, handle, kind, owner_id FROM accounts WHERE id = %(id)s

-- name: accounts_by_id
SELECT id, workspace_id, handle, kind, owner_id FROM accounts WHERE id = ANY(%(ids)s::uuid[])

-- name: insert_runner
INSERT INTO runners (id, workspace_id, name) VALUES (%(id)s, compass_workspace(), %(name)s)

-- name: get_runner
SELECT id, workspace_id, name FROM runners WHERE id = %(id)s

-- name: assign_agent
INSERT INTO runner_agents (runner_id, agent_id, workspace_id)
VALUES (%(runner_id)s, %(agent_id)s, compass_workspace())
ON CONFLICT DO NOTHING

-- name: runner_agent
SELECT 1 AS ok FROM runner_agents WHERE runner_id = %(runner_id)s AND agent_id = %(agent_id)s

-- name: runner_agents
SELECT a.id, a.handle FROM runner_agents ra JOIN accounts a ON a.id = ra.agent_id
WHERE ra.runner_id = %(runner_id)s ORDER BY a.handle

-- name: insert_credential
INSERT INTO credentials (token_hash, workspace_id, account_id, runner_id)
VALUES (%(token_hash)s, compass_workspace(), %(account_id)s, %(runner_id)s)

-- name: lookup_credential
SELECT workspace_id, account_id, runner_id, kind FROM compass_credential(%(token_hash)s)

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

-- name: runner_workspace
SELECT compass_runner_workspace(%(runner_id)s) AS workspace_id
