-- The database as the last line, again.
--
-- 1. compass_writer's workspace is proven, not claimed. Under that role the
-- workspace's policy read compass.writer_workspace, a setting any statement
-- of compass_writer could set to any workspace. It now reads the workspace
-- from the transaction's credential, as it does for compass_app: the write
-- functions name their caller's credential at entry (compass_writer_scope),
-- and compass_writer reads no credential's digest, so the only workspaces it
-- can reach are those of the callers it serves.

CREATE OR REPLACE FUNCTION compass_workspace() RETURNS uuid
LANGUAGE sql STABLE AS $$
  SELECT CASE WHEN current_user = 'compass_maintenance'
    THEN nullif(pg_catalog.current_setting('compass.operator_workspace', true), '')::uuid
    ELSE public.compass_credential_workspace()
  END
$$;

CREATE OR REPLACE FUNCTION compass_writer_scope(cred bytea, actor uuid) RETURNS uuid
LANGUAGE plpgsql AS $$
BEGIN
  PERFORM set_config('compass.credential', encode(cred, 'hex'), true);
  PERFORM set_config('compass.actor', coalesce(actor::text, ''), true);
  RETURN compass_credential_workspace();
END
$$;

-- A batch of posts writes each item's keys under that item's credential.
CREATE OR REPLACE FUNCTION compass_posts_once(items jsonb) RETURNS jsonb
LANGUAGE plpgsql SECURITY DEFINER SET search_path = public, pg_temp AS $$
DECLARE
  n int := jsonb_array_length(items);
  results jsonb[] := array_fill(NULL::jsonb, ARRAY[n]);
  fresh jsonb := '[]';
  slots int[] := '{}';
  -- What an earlier item of this batch posts (its key or print) → its slot.
  earlier jsonb := '{}';
  -- Each item's workspace, as its credential proved it.
  scopes uuid[] := array_fill(NULL::uuid, ARRAY[n]);
  it record;
  item jsonb;
  ws uuid;
  author uuid;
  locked uuid;
  key text;
  print_key text;
  prior record;
  found_id uuid;
  i int;
  j int;
BEGIN
  FOR it IN
    SELECT x.item, x.n::int AS n FROM jsonb_array_elements(items) WITH ORDINALITY AS x (item, n)
    ORDER BY (x.item ->> 'author_id')::uuid, x.n
  LOOP
    author := (it.item ->> 'author_id')::uuid;
    ws := compass_writer_scope(decode(it.item ->> 'cred', 'hex'), author);
    scopes[it.n] := ws;
    IF ws IS NULL OR NOT compass_vouched(author) THEN
      -- Refused by the post itself, the way it refuses it.
      fresh := fresh || jsonb_build_array(it.item);
      slots := slots || it.n;
      CONTINUE;
    END IF;
    IF locked IS DISTINCT FROM author THEN
      PERFORM 1 FROM accounts WHERE id = author FOR NO KEY UPDATE;
      locked := author;
    END IF;
    key := it.item ->> 'client_key';
    IF key IS NOT NULL THEN
      SELECT k.message_id, k.digest INTO prior
        FROM post_keys k WHERE k.author_id = author AND k.client_key = key;
      IF FOUND THEN
        results[it.n] := CASE WHEN prior.digest = decode(it.item ->> 'digest', 'hex')
          THEN compass_post_prior(prior.message_id, 'repeated')
          ELSE jsonb_build_object('key_reused', prior.message_id) END;
        CONTINUE;
      END IF;
      IF earlier ? ('k' || author || ' ' || key) THEN
        results[it.n] := jsonb_build_object(
          'same_as', earlier -> ('k' || author || ' ' || key), 'outcome', 'repeated');
        CONTINUE;
      END IF;
    END IF;
    print_key := NULL;
    IF it.item ? 'print' THEN
      print_key := 'p' || author || ' ' || (it.item ->> 'channel_id') || ' ' || (it.item ->> 'print');
      SELECT a.message_id INTO found_id
        FROM ask_prints p
        JOIN asks a ON a.ask_id = p.ask_id
        JOIN messages m ON m.id = a.message_id
        WHERE p.author_id = author AND p.channel_id = (it.item ->> 'channel_id')::uuid
          AND p.print = decode(it.item ->> 'print', 'hex')
          AND (a.due_at IS NULL OR a.due_at > clock_timestamp())
        ORDER BY m.position DESC
        LIMIT 1;
      IF found_id IS NOT NULL THEN
        IF key IS NOT NULL THEN
          INSERT INTO post_keys (author_id, client_key, workspace_id, message_id, digest)
            VALUES (author, key, ws, found_id, decode(it.item ->> 'digest', 'hex'));
        END IF;
        results[it.n] := compass_post_prior(found_id, 'already_open');
        CONTINUE;
      END IF;
      IF earlier ? print_key THEN
        results[it.n] := jsonb_build_object(
          'same_as', earlier -> print_key, 'outcome', 'already_open');
        CONTINUE;
      END IF;
    END IF;
    fresh := fresh || jsonb_build_array(it.item);
    slots := slots || it.n;
    IF key IS NOT NULL THEN
      earlier := earlier || jsonb_build_object('k' || author || ' ' || key, it.n);
    END IF;
    IF print_key IS NOT NULL THEN
      earlier := earlier || jsonb_build_object(print_key, it.n);
    END IF;
  END LOOP;

  IF cardinality(slots) > 0 THEN
    DECLARE
      posted jsonb := compass_post_messages(fresh);
      result jsonb;
    BEGIN
      FOR i IN 1 .. cardinality(slots) LOOP
        result := posted -> (i - 1);
        item := items -> (slots[i] - 1);
        IF jsonb_typeof(result -> 'message') = 'object' THEN
          author := (item ->> 'author_id')::uuid;
          ws := scopes[slots[i]];
          PERFORM compass_writer_scope(decode(item ->> 'cred', 'hex'), author);
          IF item ? 'client_key' THEN
            INSERT INTO post_keys (author_id, client_key, workspace_id, message_id, digest)
              VALUES (author, item ->> 'client_key', ws, (item ->> 'id')::uuid,
                      decode(item ->> 'digest', 'hex'));
          END IF;
          IF item ? 'print' THEN
            INSERT INTO ask_prints (ask_id, workspace_id, author_id, channel_id, print)
              VALUES (item -> 'ask_ids' ->> 0, ws, author, (item ->> 'channel_id')::uuid,
                      decode(item ->> 'print', 'hex'));
          END IF;
          result := result || '{"outcome": "posted"}';
        END IF;
        results[slots[i]] := result;
      END LOOP;
    END;
  END IF;

  -- An item that repeats an earlier one of this batch gets what that one got.
  FOR i IN 1 .. n LOOP
    IF results[i] ? 'same_as' THEN
      j := (results[i] ->> 'same_as')::int;
      item := items -> (i - 1);
      IF jsonb_typeof(results[j] -> 'message') <> 'object' THEN
        results[i] := results[j];
      ELSIF results[i] ->> 'outcome' = 'repeated'
            AND item ->> 'digest' IS DISTINCT FROM items -> (j - 1) ->> 'digest' THEN
        results[i] := jsonb_build_object('key_reused', items -> (j - 1) ->> 'id');
      ELSE
        IF results[i] ->> 'outcome' = 'already_open' AND item ? 'client_key' THEN
          author := (item ->> 'author_id')::uuid;
          ws := scopes[i];
          PERFORM compass_writer_scope(decode(item ->> 'cred', 'hex'), author);
          INSERT INTO post_keys (author_id, client_key, workspace_id, message_id, digest)
            VALUES (author, item ->> 'client_key', ws, (items -> (j - 1) ->> 'id')::uuid,
                    decode(item ->> 'digest', 'hex'));
        END IF;
        results[i] := jsonb_build_object('message', results[j] -> 'message', 'numbered', true,
                                         'outcome', results[i] ->> 'outcome');
      END IF;
    END IF;
  END LOOP;
  RETURN to_jsonb(results);
END
$$;
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

-- The role the transaction runs as: a SECURITY DEFINER function's
-- current_user is its owner, but the role its caller took stays in `role`.
CREATE FUNCTION compass_asker_role() RETURNS text
LANGUAGE sql STABLE AS $$
  SELECT pg_catalog.current_setting('role')
$$;

-- The workspace of whoever is asking (NULL: none).
CREATE FUNCTION compass_asker_workspace() RETURNS uuid
LANGUAGE sql STABLE SECURITY DEFINER SET search_path = pg_catalog, public AS $$
  SELECT CASE public.compass_asker_role()
    WHEN 'compass_maintenance'
      THEN nullif(current_setting('compass.operator_workspace', true), '')::uuid
    WHEN 'compass_app' THEN public.compass_credential_workspace()
  END
$$;

-- The account whose credential the transaction names, if it still signs in.
CREATE FUNCTION compass_asker_account() RETURNS uuid
LANGUAGE sql STABLE SECURITY DEFINER SET search_path = pg_catalog, public AS $$
  SELECT c.account_id FROM public.credentials c
  WHERE public.compass_asker_role() = 'compass_app'
    AND c.token_hash = decode(current_setting('compass.credential', true), 'hex')
    AND (c.revoked_at IS NULL OR c.revoked_at >= now())
    AND (c.expires_at IS NULL OR c.expires_at > now())
$$;

-- Whether whoever is asking may administer its workspace.
CREATE FUNCTION compass_asker_is_admin() RETURNS boolean
LANGUAGE sql STABLE SECURITY DEFINER SET search_path = pg_catalog, public AS $$
  SELECT CASE public.compass_asker_role()
    WHEN 'compass_maintenance'
      THEN nullif(current_setting('compass.operator_workspace', true), '') IS NOT NULL
    WHEN 'compass_app' THEN EXISTS (
      SELECT 1 FROM public.accounts a
      WHERE a.id = public.compass_asker_account() AND a.kind = 'human' AND a.role = 'admin'
        AND a.deactivated_at IS NULL)
    ELSE false
  END
$$;

CREATE FUNCTION compass_admin_workspace() RETURNS uuid
LANGUAGE plpgsql STABLE SECURITY DEFINER SET search_path = pg_catalog, public AS $$
DECLARE
  ws uuid := public.compass_asker_workspace();
BEGIN
  IF ws IS NULL OR NOT public.compass_asker_is_admin() THEN
    RAISE EXCEPTION 'only an admin of the workspace may do this'
      USING ERRCODE = 'insufficient_privilege';
  END IF;
  RETURN ws;
END
$$;

-- A token for an account or a runner of the admin's workspace.
CREATE FUNCTION compass_issue_token(
  token_hash bytea, id uuid, account_id uuid, runner_id uuid, label text, expires_in interval
) RETURNS void
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, public AS $$
DECLARE
  ws uuid := public.compass_admin_workspace();
BEGIN
  INSERT INTO public.credentials (token_hash, id, workspace_id, account_id, runner_id, label,
                                  expires_at)
  VALUES (compass_issue_token.token_hash, compass_issue_token.id, ws,
          compass_issue_token.account_id, compass_issue_token.runner_id,
          compass_issue_token.label, now() + compass_issue_token.expires_in);
END
$$;

-- Revokes credentials of the asker's workspace: those named (`ids`), of the
-- kind named (NULL: any), or every one of `account` (with `kinds`) that
-- still signs in. An admin revokes any; anyone else only its own account's
-- sessions. Returns the ids revoked now.
CREATE FUNCTION compass_revoke_credentials(
  ids uuid[], kinds text[], account uuid, live_only boolean
) RETURNS TABLE (id uuid)
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, public AS $$
DECLARE
  ws uuid := public.compass_asker_workspace();
  admin boolean := public.compass_asker_is_admin();
  own uuid := public.compass_asker_account();
BEGIN
  IF ws IS NULL THEN
    RAISE EXCEPTION 'no workspace to revoke in' USING ERRCODE = 'insufficient_privilege';
  END IF;
  IF NOT admin AND (own IS NULL OR kinds IS DISTINCT FROM ARRAY['session']
                    OR (account IS NOT NULL AND account <> own)) THEN
    RAISE EXCEPTION 'only an admin of the workspace may do this'
      USING ERRCODE = 'insufficient_privilege';
  END IF;
  RETURN QUERY
    UPDATE public.credentials c SET revoked_at = now()
    WHERE c.workspace_id = ws
      AND (ids IS NULL OR c.id = ANY (ids))
      AND (kinds IS NULL OR c.kind = ANY (kinds))
      AND (account IS NULL OR c.account_id = account)
      AND (admin OR c.account_id = own)
      AND c.revoked_at IS NULL
      AND (NOT live_only OR c.expires_at IS NULL OR c.expires_at > now())
    RETURNING c.id;
END
$$;

-- A rotation's old token: revoked now, or expiring when the grace ends.
CREATE FUNCTION compass_retire_token(id uuid, replaced_by uuid, grace interval) RETURNS void
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, public AS $$
DECLARE
  ws uuid := public.compass_admin_workspace();
BEGIN
  UPDATE public.credentials c
  SET replaced_by = compass_retire_token.replaced_by,
      revoked_at = CASE WHEN grace > interval '0' THEN NULL ELSE now() END,
      expires_at = CASE WHEN grace > interval '0'
                        THEN least(coalesce(c.expires_at, 'infinity'), now() + grace)
                        ELSE c.expires_at END
  WHERE c.id = compass_retire_token.id AND c.workspace_id = ws;
END
$$;

-- An account of the admin's workspace; or, for an agent in a runner's
-- session, a member agent below itself.
CREATE FUNCTION compass_create_account(
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

CREATE FUNCTION compass_set_role(id uuid, role text) RETURNS SETOF accounts
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, public AS $$
DECLARE
  ws uuid := public.compass_admin_workspace();
BEGIN
  RETURN QUERY
    UPDATE public.accounts a SET role = compass_set_role.role
    WHERE a.id = compass_set_role.id AND a.workspace_id = ws
    RETURNING *;
END
$$;

CREATE FUNCTION compass_set_email(id uuid, email text) RETURNS SETOF uuid
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, public AS $$
DECLARE
  ws uuid := public.compass_admin_workspace();
BEGIN
  RETURN QUERY
    UPDATE public.accounts a SET email = compass_set_email.email
    WHERE a.id = compass_set_email.id AND a.workspace_id = ws AND a.kind = 'human'
    RETURNING a.id;
END
$$;

CREATE FUNCTION compass_set_deactivated(id uuid, deactivated boolean) RETURNS void
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, public AS $$
DECLARE
  ws uuid := public.compass_admin_workspace();
BEGIN
  UPDATE public.accounts a
  SET deactivated_at = CASE WHEN compass_set_deactivated.deactivated THEN now() END
  WHERE a.id = compass_set_deactivated.id AND a.workspace_id = ws;
END
$$;

DO $$
DECLARE
  f text;
BEGIN
  FOREACH f IN ARRAY ARRAY[
    'compass_asker_workspace()', 'compass_asker_account()', 'compass_asker_is_admin()',
    'compass_admin_workspace()',
    'compass_issue_token(bytea, uuid, uuid, uuid, text, interval)',
    'compass_revoke_credentials(uuid[], text[], uuid, boolean)',
    'compass_retire_token(uuid, uuid, interval)',
    'compass_create_account(uuid, text, text, uuid, text, uuid)',
    'compass_set_role(uuid, text)', 'compass_set_email(uuid, text)',
    'compass_set_deactivated(uuid, boolean)'
  ] LOOP
    EXECUTE format('REVOKE ALL ON FUNCTION %s FROM PUBLIC', f);
    EXECUTE format('GRANT EXECUTE ON FUNCTION %s TO compass_app, compass_maintenance', f);
  END LOOP;
END
$$;

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
