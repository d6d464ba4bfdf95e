-- after: 0028

-- An account of the admin's workspace; or, for an agent in a runner's
-- session, a member agent below itself.
CREATE OR REPLACE FUNCTION compass_create_account(
  id uuid, handle text, kind text, owner_id uuid, role text, parent_id uuid
) RETURNS SETOF accounts
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, public AS $$
DECLARE
  ws uuid := public.compass_asker_workspace();
BEGIN
  IF ws IS NULL OR NOT (
       public.compass_asker_is_admin()
       OR (public.compass_asker_role() = 'compass_app'
           AND compass_create_account.kind = 'agent' AND compass_create_account.role = 'member'
           AND compass_create_account.parent_id IS NOT NULL
           AND compass_create_account.parent_id = public.compass_actor())) THEN
    RAISE EXCEPTION 'only an admin of the workspace may do this'
      USING ERRCODE = 'insufficient_privilege';
  END IF;
  RETURN QUERY
    INSERT INTO public.accounts (id, workspace_id, handle, kind, owner_id, role, parent_id)
    VALUES (compass_create_account.id, ws, compass_create_account.handle,
            compass_create_account.kind, compass_create_account.owner_id,
            compass_create_account.role, compass_create_account.parent_id)
    RETURNING *;
END
$$;
REVOKE ALL ON FUNCTION compass_create_account(id uuid, handle text, kind text, owner_id uuid, role text, parent_id uuid) FROM PUBLIC, compass_app, compass_maintenance, compass_writer;
GRANT EXECUTE ON FUNCTION compass_create_account(id uuid, handle text, kind text, owner_id uuid, role text, parent_id uuid) TO compass_app, compass_maintenance;
