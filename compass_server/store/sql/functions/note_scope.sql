-- after: 0054

-- The workspace compass_proof proves and notes for the transaction (NULL:
-- the credential scopes nothing).
CREATE OR REPLACE FUNCTION compass_note_scope(cred bytea, actor uuid) RETURNS uuid
LANGUAGE plpgsql AS $$
BEGIN
  RETURN (compass_proof(cred, actor)).ws;
END
$$;
REVOKE ALL ON FUNCTION compass_note_scope(cred bytea, actor uuid) FROM PUBLIC, compass_app, compass_maintenance, compass_writer;
GRANT EXECUTE ON FUNCTION compass_note_scope(cred bytea, actor uuid) TO PUBLIC;
