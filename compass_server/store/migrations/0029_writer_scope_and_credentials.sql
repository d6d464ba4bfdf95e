-- The database as the last line, again.
--
-- 1. compass_writer's workspace is proven, not claimed. Under that role the
-- workspace's policy read compass.writer_workspace, a setting any statement
-- of compass_writer could set to any workspace. It now reads the workspace
-- from the transaction's credential, as it does for compass_app: the write
-- functions name their caller's credential at entry (compass_writer_scope),
-- and compass_writer reads no credential's digest, so the only workspaces it
-- can reach are those of the callers it serves.

-- 2. Credentials and roles are written only through functions that check
-- who is asking. compass_app held INSERT and UPDATE on credentials and on
-- every column of accounts, so within its workspace a member's credential
-- could insert a credential for the admin, or make itself admin. Now it
-- writes neither table's sensitive parts directly: issuing, retiring and
-- revoking credentials, creating accounts and changing a role, an email or
-- deactivation go through the functions below (SECURITY DEFINER: they run as
-- the owner, so each names the workspace in every statement). Each asks
-- first who is asking: the operator (compass_maintenance, held to the
-- workspace it names), or a credential of an active human admin. A person
-- may also end their own sessions, and an agent in a runner's session may
-- create a member agent below itself.

-- The direct writes go. compass_app keeps the columns of accounts its own
-- rules change (an agent's status and presence, open asks, a tree's links).
REVOKE INSERT, UPDATE ON credentials FROM compass_app;
REVOKE INSERT (token_hash, id, workspace_id, account_id, runner_id, label, expires_at,
               kind, idle, ends_at, user_agent, ask_id) ON credentials FROM compass_app;
REVOKE UPDATE (revoked_at, replaced_by, expires_at) ON credentials FROM compass_app;
REVOKE INSERT, UPDATE ON accounts FROM compass_app;
GRANT UPDATE (status, status_text, presence_state, presence_text, open_asks, parent_id, chain)
  ON accounts TO compass_app;
-- Locking a row (an admin's rotation locks the old token) needs UPDATE on a
-- column: marking a credential used is the one it keeps.
GRANT UPDATE (last_used_at) ON credentials TO compass_app;
