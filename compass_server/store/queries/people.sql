-- name: identity_account
-- The account a provider's (issuer, subject) is linked to in this workspace.
SELECT a.id, a.handle, a.kind, a.deactivated_at IS NOT NULL AS deactivated
FROM identities i JOIN accounts a ON a.id = i.account_id
WHERE i.issuer = %(issuer)s AND i.subject = %(subject)s

-- name: seen_identity
UPDATE identities SET last_seen_at = now(), email = %(email)s
WHERE issuer = %(issuer)s AND subject = %(subject)s

-- name: account_by_email
-- A person the operator created with this email, not yet linked to this issuer.
SELECT a.id, a.handle, a.kind, a.deactivated_at IS NOT NULL AS deactivated
FROM accounts a
WHERE lower(a.email) = lower(%(email)s) AND a.kind = 'human'
  AND NOT EXISTS (SELECT 1 FROM identities i WHERE i.account_id = a.id AND i.issuer = %(issuer)s)

-- name: insert_identity
INSERT INTO identities (workspace_id, issuer, subject, account_id, email)
VALUES (compass_workspace(), %(issuer)s, %(subject)s, %(account_id)s, %(email)s)

-- name: insert_person
INSERT INTO accounts (id, workspace_id, handle, kind, role, email)
VALUES (%(id)s, compass_workspace(), %(handle)s, 'human', 'member', %(email)s)
RETURNING id, handle

-- name: set_email
SELECT id FROM compass_set_email(%(id)s, %(email)s) AS id

-- name: insert_session
INSERT INTO credentials
  (token_hash, id, workspace_id, account_id, label, expires_at, kind, idle, ends_at, user_agent)
VALUES (%(token_hash)s, %(id)s, compass_workspace(), %(account_id)s, %(label)s,
        now() + least(%(idle)s::interval, %(lifetime)s::interval), 'session',
        %(idle)s::interval, now() + %(lifetime)s::interval, %(user_agent)s)

-- name: list_sessions
-- Newest first.
SELECT c.id, c.account_id, c.label, c.user_agent, c.created_at, c.last_used_at, c.expires_at,
       c.ends_at, c.revoked_at,
       c.revoked_at IS NULL AND c.expires_at > now() AS active
FROM credentials c
WHERE c.kind = 'session' AND c.account_id = %(account_id)s
  AND (%(include_inactive)s OR (c.revoked_at IS NULL AND c.expires_at > now()))
ORDER BY c.created_at DESC, c.id DESC
LIMIT %(limit)s

-- name: get_session
SELECT c.id, c.account_id, c.label, c.user_agent, c.created_at, c.last_used_at, c.expires_at,
       c.ends_at, c.revoked_at,
       c.revoked_at IS NULL AND c.expires_at > now() AS active
FROM credentials c WHERE c.id = %(id)s AND c.kind = 'session'

-- name: revoke_credential
-- A session or link (kind) that still signs in; none when it was revoked already.
SELECT id FROM compass_revoke_credentials(ARRAY[%(id)s]::uuid[], ARRAY[%(kind)s::text], NULL, false)

-- name: revoke_sessions_of
SELECT id FROM compass_revoke_credentials(NULL, ARRAY['session'], %(account_id)s, true)

-- name: revoke_everything_of
-- Every credential of the account that still signs in: tokens, sessions, links.
SELECT id FROM compass_revoke_credentials(NULL, NULL, %(account_id)s, true)

-- name: lock_account
SELECT id, kind, role, deactivated_at FROM accounts WHERE id = %(id)s FOR UPDATE

-- name: set_deactivated
SELECT compass_set_deactivated(%(id)s, %(deactivated)s)

-- name: other_active_admins
SELECT count(*) AS n FROM accounts
WHERE role = 'admin' AND deactivated_at IS NULL AND id <> %(id)s

-- name: signin_key
SELECT key FROM signin_key

-- name: make_signin_key
INSERT INTO signin_key (key) VALUES (%(key)s) ON CONFLICT (one) DO NOTHING

-- name: person_to_sign_in
SELECT id, handle, kind, deactivated_at FROM accounts WHERE id = %(id)s FOR SHARE

-- name: insert_signin_address
INSERT INTO signin_addresses (id, workspace_id, account_id, token_hash, next, expires_at)
VALUES (%(id)s, compass_workspace(), %(account_id)s, %(token_hash)s, %(next)s,
        now() + %(lifetime)s::interval)
RETURNING expires_at

-- name: signin_address_holder
SELECT status, handle FROM compass_signin_address_holder(%(digest)s)

-- name: use_signin_address
SELECT status, account_id, handle, next FROM compass_use_signin_address(
  %(digest)s, %(session_digest)s, %(session_id)s, %(idle)s, %(lifetime)s, %(agent)s)
