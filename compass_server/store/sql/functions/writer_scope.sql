-- after: 0018

-- The write functions' scope: the credential's workspace and the account it
-- vouches for, proved once for the transaction (compass_note_scope), never
-- taken from a setting.
CREATE OR REPLACE FUNCTION compass_writer_scope(cred bytea, actor uuid) RETURNS uuid
LANGUAGE sql AS $$
  SELECT compass_note_scope(cred, actor)
$$;
REVOKE ALL ON FUNCTION compass_writer_scope(cred bytea, actor uuid) FROM PUBLIC, compass_app, compass_maintenance, compass_writer;
GRANT EXECUTE ON FUNCTION compass_writer_scope(cred bytea, actor uuid) TO compass_writer;
