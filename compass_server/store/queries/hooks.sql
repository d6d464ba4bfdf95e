-- name: issue
SELECT compass_issue_hook_token(%(token_hash)s, %(id)s, %(agent_id)s, %(channel_id)s,
                                %(policy)s, %(label)s, %(expires_in)s::interval) AS issued

-- name: humans_by_handle
SELECT id, handle FROM accounts
WHERE handle = ANY (%(handles)s::text[]) AND kind = 'human' AND deactivated_at IS NULL

-- name: hook_of
-- The hook token's channel and policy (its own workspace's, by row security).
SELECT channel_id, policy FROM hook_tokens WHERE credential_id = %(token_id)s

-- name: hold
-- One more held request waits on the ask.
INSERT INTO hook_holds (ask_id, workspace_id, holders)
VALUES (%(ask_id)s, compass_workspace(), 1)
ON CONFLICT (ask_id) DO UPDATE SET holders = hook_holds.holders + 1, updated_at = now()
RETURNING holders

-- name: release
-- One held request left; how many still wait.
UPDATE hook_holds SET holders = greatest(holders - 1, 0), updated_at = now()
WHERE ask_id = %(ask_id)s
RETURNING holders

-- name: forget
-- Nobody holds the ask any more.
DELETE FROM hook_holds WHERE ask_id = %(ask_id)s AND holders = 0
