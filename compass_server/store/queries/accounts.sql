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

-- name: presence_heard
-- The agents an account works with, whose presence its Subscribe streams
-- hear: those taking part in its channels (members, or under an agent that
-- is one), and those whose inbox it hears (its own and those granted to it).
-- The feed files presence changes by the same rule (events/hub.py,
-- _extra_keys): change both together.
SELECT a.id, a.presence_state, a.presence_text FROM accounts a
WHERE a.kind = 'agent'
  AND (cardinality(%(ids)s::uuid[]) = 0 OR a.id = ANY(%(ids)s::uuid[]))
  AND (
    a.chain && ARRAY(
      SELECT cm.account_id FROM channel_members cm
      WHERE cm.channel_id IN (SELECT p.channel_id FROM compass_participation_of(%(actor)s) p)
    )
    OR a.owner_id = %(actor)s
    OR a.id IN (SELECT g.agent_id FROM inbox_grants g WHERE g.account_id = %(actor)s)
  )
ORDER BY a.handle

-- name: granted_agents
-- The agents whose inbox an account hears by a grant (besides its own).
SELECT agent_id FROM inbox_grants WHERE account_id = %(actor)s

-- name: chains
-- Each account with the agents above it (itself first), and its owner.
SELECT id, chain, owner_id FROM accounts WHERE id = ANY(%(ids)s::uuid[])
