-- The database as the last line: a request can't reach another workspace
-- even when the code above it is wrong.
--
-- 1. The scope is proven, not claimed. The request path (compass_app) used to
-- name its workspace in compass.workspace_id, which any statement could set
-- to any workspace. Now it names its caller's credential (the SHA-256 digest
-- of the token it signed in with) in compass.credential, and
-- compass_workspace() reads the workspace from that credential, if it is
-- neither revoked nor expired. compass_app can't read credentials' digests,
-- so the only ones it can name are those of the callers it serves. Policies
-- call compass_workspace() once per statement (an InitPlan), not per row.
--
-- 2. Cross-workspace references are impossible: every reference between
-- workspace rows carries the workspace (a composite foreign key), so a row of
-- workspace A can't point at a row of B whoever writes it.
--
-- 3. Work across workspaces (reaping silent servers, numbering leftovers,
-- expiring asks, the server registry and its revocation bookkeeping) and the
-- operator's administration belong to compass_maintenance; compass_app can't
-- call or write them.


-- 2. References carry their workspace.
ALTER TABLE accounts ADD CONSTRAINT accounts_workspace_id_id_key UNIQUE (workspace_id, id);
ALTER TABLE runners ADD CONSTRAINT runners_workspace_id_id_key UNIQUE (workspace_id, id);
ALTER TABLE credentials ADD CONSTRAINT credentials_workspace_id_id_key UNIQUE (workspace_id, id);
ALTER TABLE channels ADD CONSTRAINT channels_workspace_id_id_key UNIQUE (workspace_id, id);
ALTER TABLE messages ADD CONSTRAINT messages_workspace_id_id_key UNIQUE (workspace_id, id);
ALTER TABLE asks ADD CONSTRAINT asks_workspace_id_ask_id_key UNIQUE (workspace_id, ask_id);
ALTER TABLE inbox_items ADD CONSTRAINT inbox_items_workspace_id_id_key UNIQUE (workspace_id, id);
ALTER TABLE inbox_messages
  ADD CONSTRAINT inbox_messages_workspace_id_id_key UNIQUE (workspace_id, id);

DO $$
DECLARE
  ref record;
BEGIN
  FOR ref IN SELECT * FROM (VALUES
    ('accounts', 'owner_id', 'accounts', 'id', ''),
    ('runner_agents', 'runner_id', 'runners', 'id', ''),
    ('runner_agents', 'agent_id', 'accounts', 'id', ''),
    ('credentials', 'account_id', 'accounts', 'id', ''),
    ('credentials', 'runner_id', 'runners', 'id', ''),
    ('credentials', 'replaced_by', 'credentials', 'id', ''),
    ('channel_members', 'channel_id', 'channels', 'id', ''),
    ('channel_members', 'account_id', 'accounts', 'id', ''),
    ('messages', 'channel_id', 'channels', 'id', ''),
    ('messages', 'author_id', 'accounts', 'id', ''),
    ('asks', 'message_id', 'messages', 'id', ''),
    ('ask_history', 'ask_id', 'asks', 'ask_id', ''),
    ('ask_history', 'actor_id', 'accounts', 'id', ''),
    ('agent_sessions', 'agent_id', 'accounts', 'id', ''),
    ('agent_sessions', 'runner_id', 'runners', 'id', ''),
    ('delivery_cursors', 'agent_id', 'accounts', 'id', ''),
    ('inbox_items', 'agent_id', 'accounts', 'id', ''),
    ('inbox_items', 'answered_by', 'accounts', 'id', ''),
    ('inbox_items', 'closed_by', 'accounts', 'id', ''),
    ('inbox_items', 'ask_message_id', 'inbox_messages', 'id', ''),
    ('inbox_messages', 'item_id', 'inbox_items', 'id', ''),
    ('inbox_messages', 'author_id', 'accounts', 'id', ''),
    ('inbox_messages', 'answers_message_id', 'inbox_messages', 'id', ''),
    ('inbox_files', 'item_id', 'inbox_items', 'id', ''),
    ('inbox_files', 'message_id', 'inbox_messages', 'id', ' ON DELETE CASCADE'),
    ('inbox_grants', 'agent_id', 'accounts', 'id', ''),
    ('inbox_grants', 'account_id', 'accounts', 'id', '')
  ) AS r (tbl, col, target, key, action) LOOP
    EXECUTE format('ALTER TABLE %I DROP CONSTRAINT %I', ref.tbl, ref.tbl || '_' || ref.col || '_fkey');
    EXECUTE format(
      'ALTER TABLE %I ADD CONSTRAINT %I FOREIGN KEY (workspace_id, %I) '
      'REFERENCES %I (workspace_id, %I)%s',
      ref.tbl, ref.tbl || '_' || ref.col || '_fkey', ref.col, ref.target, ref.key, ref.action);
  END LOOP;
END
$$;

-- 3. Who may do what. The request path (compass_app) keeps what a
-- workspace's own calls need, an admin's included (accounts, runners,
-- assignments, tokens), all held to its workspace by the policies above;
-- it may write no workspace, no event counter, no server, and it reads no
-- credential's digest: the digests it can name are only those it was given.
REVOKE ALL ON credentials, servers FROM compass_app;
REVOKE INSERT, UPDATE, DELETE ON workspaces FROM compass_app;
REVOKE UPDATE, DELETE ON runners FROM compass_app;
REVOKE DELETE ON accounts FROM compass_app;
REVOKE INSERT, DELETE ON event_counters FROM compass_app;
-- An admin's change of roles locks its workspace's row.
GRANT UPDATE (name) ON workspaces TO compass_app;
GRANT SELECT (
  id, workspace_id, account_id, runner_id, label, created_at, expires_at, revoked_at,
  replaced_by, last_used_at
) ON credentials TO compass_app;
GRANT INSERT (token_hash, id, workspace_id, account_id, runner_id, label, expires_at)
  ON credentials TO compass_app;
GRANT UPDATE (revoked_at, replaced_by, expires_at) ON credentials TO compass_app;

-- compass_maintenance: the operator's administration of the workspace it
-- names (the same policies hold it there), and the servers' own work across
-- workspaces, which runs only through the functions granted below.
GRANT SELECT, INSERT, UPDATE ON workspaces, event_counters, events, accounts, credentials
  TO compass_maintenance;
GRANT SELECT, INSERT ON runners TO compass_maintenance;
GRANT SELECT, INSERT, DELETE ON runner_agents TO compass_maintenance;
GRANT SELECT, DELETE ON agent_sessions TO compass_maintenance;
GRANT SELECT ON inbox_items TO compass_maintenance;
GRANT SELECT, INSERT, UPDATE, DELETE ON servers TO compass_maintenance;
GRANT USAGE, SELECT ON SEQUENCE compass_access_seq TO compass_maintenance;

