-- name: sign_in
SELECT token_id, workspace_id, account_id, runner_id, kind, revoked, expires_in, via, deactivated
FROM compass_sign_in(%(token_hash)s)

-- name: lock_workspace
-- Serialises changes to who is admin: the first human, and role changes.
SELECT name FROM workspaces WHERE id = compass_workspace() FOR NO KEY UPDATE

-- name: get_workspace
SELECT id, name FROM workspaces WHERE id = compass_workspace()

-- name: role_of
-- Held until the operation commits, so a demotion waits for it.
SELECT role FROM accounts WHERE id = %(id)s AND kind = 'human' FOR SHARE

-- name: has_human
SELECT EXISTS (SELECT 1 FROM accounts WHERE kind = 'human') AS found

-- name: count_admins
SELECT count(*) AS n FROM accounts WHERE role = 'admin'

-- name: insert_account
SELECT id, workspace_id, handle, kind, owner_id, role, created_at, parent_id
FROM compass_create_account(%(id)s, %(handle)s, %(kind)s, %(owner_id)s, %(role)s, %(parent_id)s)

-- name: start_lane
-- An agent's delivery lane starts where the agent came to be: no event
-- before it can be the agent's to hear, so its first bind reads none of them.
INSERT INTO delivery_cursors (agent_id, workspace_id, acked_event_id)
VALUES (%(agent_id)s, compass_workspace(), coalesce(
  (SELECT last_event_id FROM event_counters WHERE workspace_id = compass_workspace()), 0))
ON CONFLICT (agent_id) DO NOTHING

-- name: get_account
SELECT id, workspace_id, handle, kind, owner_id, role, created_at, parent_id FROM accounts WHERE id = %(id)s

-- name: set_role
SELECT id, workspace_id, handle, kind, owner_id, role, created_at, parent_id
FROM compass_set_role(%(id)s, %(role)s)

-- name: list_accounts
SELECT id, workspace_id, handle, kind, owner_id, role, created_at, parent_id FROM accounts
WHERE (created_at, id) > (%(after_created)s, %(after_id)s)
ORDER BY created_at, id
LIMIT %(limit)s

-- name: insert_runner
INSERT INTO runners (id, workspace_id, name) VALUES (%(id)s, compass_workspace(), %(name)s)

-- name: get_runner
SELECT r.id, r.workspace_id, r.name, r.created_at,
       array(SELECT ra.agent_id FROM runner_agents ra JOIN accounts a ON a.id = ra.agent_id
             WHERE ra.runner_id = r.id ORDER BY a.handle) AS agent_ids
FROM runners r WHERE r.id = %(id)s

-- name: list_runners
SELECT r.id, r.workspace_id, r.name, r.created_at,
       array(SELECT ra.agent_id FROM runner_agents ra JOIN accounts a ON a.id = ra.agent_id
             WHERE ra.runner_id = r.id ORDER BY a.handle) AS agent_ids
FROM runners r
WHERE (r.created_at, r.id) > (%(after_created)s, %(after_id)s)
ORDER BY r.created_at, r.id
LIMIT %(limit)s

-- name: reparent_agent
SELECT compass_reparent_agent(%(agent_id)s, %(parent_id)s) AS result

-- name: assign_agent
INSERT INTO runner_agents (runner_id, agent_id, workspace_id)
VALUES (%(runner_id)s, %(agent_id)s, compass_workspace())
ON CONFLICT DO NOTHING

-- name: unassign_agent
SELECT sessions, presence_changed FROM compass_unassign_agent(%(runner_id)s, %(agent_id)s)

-- name: insert_token
SELECT compass_issue_token(%(token_hash)s, %(id)s, %(account_id)s, %(runner_id)s, %(label)s,
                           %(expires_in)s::interval)

-- name: get_token
SELECT c.id, c.workspace_id, c.account_id, a.kind AS account_kind, c.runner_id, c.label,
       c.created_at, c.expires_at, c.last_used_at, c.revoked_at, c.replaced_by,
       c.revoked_at IS NULL AND (c.expires_at IS NULL OR c.expires_at > now()) AS active
FROM credentials c LEFT JOIN accounts a ON a.id = c.account_id
WHERE c.id = %(id)s

-- name: lock_token
SELECT c.id, c.account_id, c.runner_id, c.label, c.created_at, c.expires_at, c.kind,
       c.revoked_at IS NULL AND (c.expires_at IS NULL OR c.expires_at > now()) AS active
FROM credentials c WHERE c.id = %(id)s AND c.kind IN ('token', 'hook') FOR UPDATE

-- name: list_tokens
-- Newest first.
SELECT c.id, c.workspace_id, c.account_id, a.kind AS account_kind, c.runner_id, c.label,
       c.created_at, c.expires_at, c.last_used_at, c.revoked_at, c.replaced_by,
       c.revoked_at IS NULL AND (c.expires_at IS NULL OR c.expires_at > now()) AS active
FROM credentials c LEFT JOIN accounts a ON a.id = c.account_id
WHERE c.kind IN ('token', 'hook')
  AND (%(account_id)s::uuid IS NULL OR c.account_id = %(account_id)s)
  AND (%(runner_id)s::uuid IS NULL OR c.runner_id = %(runner_id)s)
  AND (%(include_inactive)s OR (c.revoked_at IS NULL AND (c.expires_at IS NULL OR c.expires_at > now())))
  AND (c.created_at, c.id) < (%(before_created)s, %(before_id)s)
ORDER BY c.created_at DESC, c.id DESC
LIMIT %(limit)s

-- name: revoke_token
SELECT id FROM compass_revoke_credentials(ARRAY[%(id)s]::uuid[], NULL, NULL, false)

-- name: retire_token
-- A rotation's old token: revoked now, or expiring when the grace ends.
SELECT compass_retire_token(%(id)s, %(replaced_by)s, %(grace)s::interval)

-- name: token_states
-- Seconds each token has left; revoked ones and unknown ids are missing.
SELECT id, expires_in FROM compass_token_states(%(ids)s::uuid[])

-- name: notify_revoked
-- The token was revoked or got a new expiry: numbered, so its sender can
-- wait for every server to apply it.
WITH n AS (SELECT nextval('compass_access_seq') AS seq)
SELECT seq, pg_notify('compass_access', 'token:' || %(token_id)s::text || ':' || seq) FROM n

-- name: applied
-- This server has applied access notifications up to `seq` (NULL: every one
-- sent so far, after it reconnected and emptied its cache).
UPDATE servers SET access_seen = greatest(access_seen, coalesce(%(seq)s, compass_access_position()))
WHERE id = %(id)s

-- name: unapplied
-- Live servers (a fresh heartbeat) that have not applied `seq` yet.
SELECT count(*) AS n FROM servers
WHERE access_seen < %(seq)s AND heartbeat_at > now() - %(live)s::interval

-- name: workspace_of
-- For the operator's command line: the workspace an account, runner or
-- token id belongs to.
SELECT compass_workspace_of(%(id)s) AS workspace_id
