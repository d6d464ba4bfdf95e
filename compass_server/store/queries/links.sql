-- name: mint_link
SELECT compass_mint_link(%(workspace_id)s, %(ask_id)s, %(account_id)s, %(token_hash)s,
                         %(id)s, %(lifetime)s::interval) AS outcome

-- name: open_link
SELECT link_id, workspace_id, account_id, ask_id, revoked, expired, deactivated
FROM compass_open_link(%(token_hash)s)

-- name: get_link
SELECT c.id, c.account_id, c.ask_id, c.created_at, c.expires_at, c.revoked_at
FROM credentials c WHERE c.id = %(id)s AND c.kind = 'link'

-- name: list_links
-- Newest first: the links of one ask, or of one person.
SELECT c.id, c.account_id, c.ask_id, c.created_at, c.expires_at, c.revoked_at
FROM credentials c
WHERE c.kind = 'link'
  AND (%(ask_id)s::text IS NULL OR c.ask_id = %(ask_id)s)
  AND (%(account_id)s::uuid IS NULL OR c.account_id = %(account_id)s)
ORDER BY c.created_at DESC, c.id DESC
LIMIT %(limit)s

-- name: revoke_link
SELECT id FROM compass_revoke_credentials(ARRAY[%(id)s]::uuid[], ARRAY['link'], NULL, false)
