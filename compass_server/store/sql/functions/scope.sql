-- after: 0012

-- Scopes the transaction to the caller's credential; returns its workspace,
-- NULL when the credential scopes nothing (unknown, revoked or expired).
CREATE OR REPLACE FUNCTION compass_scope(cred bytea) RETURNS uuid
LANGUAGE sql AS $$
  SELECT compass_note_scope(cred, NULL)
$$;
REVOKE ALL ON FUNCTION compass_scope(cred bytea) FROM PUBLIC, compass_app, compass_maintenance, compass_writer;
GRANT EXECUTE ON FUNCTION compass_scope(cred bytea) TO PUBLIC;

-- Scopes the transaction to the caller's credential and names the account
-- it acts as; returns the workspace (NULL: the credential scopes nothing).
CREATE OR REPLACE FUNCTION compass_scope(cred bytea, actor uuid) RETURNS uuid
LANGUAGE sql AS $$
  SELECT compass_note_scope(cred, actor)
$$;
REVOKE ALL ON FUNCTION compass_scope(cred bytea, actor uuid) FROM PUBLIC, compass_app, compass_maintenance, compass_writer;
GRANT EXECUTE ON FUNCTION compass_scope(cred bytea, actor uuid) TO PUBLIC;
