-- name: listed
-- The workspace's standing answers (or one person's), newest first: in
-- force, or every one.
SELECT s.*, p.handle, ag.handle AS agent_handle
FROM standing_answers s
JOIN accounts p ON p.id = s.account_id
JOIN accounts ag ON ag.id = s.agent_id
WHERE (%(account_id)s::uuid IS NULL OR s.account_id = %(account_id)s)
  AND (%(include_ended)s OR (s.revoked_at IS NULL AND s.expires_at > now()))
ORDER BY s.created_at DESC, s.id
LIMIT %(limit)s

-- name: get
SELECT s.*, p.handle, ag.handle AS agent_handle
FROM standing_answers s
JOIN accounts p ON p.id = s.account_id
JOIN accounts ag ON ag.id = s.agent_id
WHERE s.id = %(id)s AND s.account_id = %(account_id)s

-- name: revoke
-- Waits for a post that took the rule (it holds the row FOR SHARE); a post
-- after the commit sees it revoked. An expired or revoked one is left as it is.
UPDATE standing_answers SET revoked_at = now()
WHERE id = %(id)s AND account_id = %(account_id)s AND revoked_at IS NULL AND expires_at > now()
RETURNING id

-- name: uses
SELECT standing_answer_id, uses FROM compass_standing_uses(%(ids)s::uuid[])
