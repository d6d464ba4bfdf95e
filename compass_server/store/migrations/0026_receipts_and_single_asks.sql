-- A tamper-evident record, and no double-asking.
--
-- 1. An ask's history is hash-chained. Every entry, as it is inserted (by
-- whichever function writes it, under the ask message's row lock), commits
-- to the entry before it of the same ask and to the ask as it stands after
-- the change: entry_hash = sha256(the previous entry's hash || its own
-- fields and state_digest), state_digest = sha256 of the ask's stored JSON.
-- `compass-server admin verify-history` recomputes every hash of a
-- workspace with the same function and names the first entry that doesn't
-- hold. Entries written before this migration are chained here, the last of
-- each ask committing to the ask as it stands now.
--
-- 2. A post may carry a client key: the author's key for one logical post,
-- kept with the message it posted (post_keys), so the same key again
-- returns that message. A post of one ask carries its print, a digest of
-- what people see of it (its text, questions, options, multiplicity and
-- named answerers); an open ask's print is kept (ask_prints) until it ends,
-- so an identical post by the same author in the same channel returns the
-- open ask. compass_posts_once does both around compass_post_messages,
-- under the author's row lock, so two retries racing post once.

-- --- the chain --------------------------------------------------------------

ALTER TABLE ask_history ADD COLUMN state_digest bytea, ADD COLUMN entry_hash bytea;

-- The ask's block as stored in its message.
CREATE FUNCTION compass_ask_json(ask text) RETURNS jsonb
LANGUAGE sql STABLE AS $$
  SELECT b -> 'ask'
  FROM asks a
  JOIN messages m ON m.id = a.message_id,
  jsonb_array_elements(m.blocks) AS b
  WHERE a.ask_id = ask AND b ->> 'kind' = 'ask' AND b -> 'ask' ->> 'ask_id' = ask
$$;

-- The hash an entry commits to, given the hash of the entry before it (NULL
-- for an ask's first). Its fields as one JSON array, so no two differ only
-- in where one field ends; the time to the microsecond, in UTC.
CREATE FUNCTION compass_history_hash(prev bytea, h ask_history) RETURNS bytea
LANGUAGE sql STABLE AS $$
  SELECT sha256(coalesce(prev, ''::bytea) || convert_to(jsonb_build_array(
    h.id, h.workspace_id, h.ask_id, h.kind, h.actor_id, h.surface, h.reason,
    to_char(h.at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"'),
    encode(h.state_digest, 'hex'))::text, 'UTF8'))
$$;

CREATE FUNCTION compass_chain_history() RETURNS trigger
LANGUAGE plpgsql SECURITY DEFINER SET search_path = public, pg_temp AS $$
BEGIN
  NEW.state_digest := sha256(convert_to(compass_ask_json(NEW.ask_id)::text, 'UTF8'));
  NEW.entry_hash := compass_history_hash(
    (SELECT h.entry_hash FROM ask_history h WHERE h.ask_id = NEW.ask_id ORDER BY h.id DESC LIMIT 1),
    NEW);
  RETURN NEW;
END
$$;

DO $$
DECLARE
  r ask_history%ROWTYPE;
  prev bytea;
  last_ask text;
BEGIN
  FOR r IN SELECT * FROM ask_history ORDER BY ask_id, id LOOP
    IF r.ask_id IS DISTINCT FROM last_ask THEN
      prev := NULL;
      last_ask := r.ask_id;
    END IF;
    IF NOT EXISTS (SELECT 1 FROM ask_history l WHERE l.ask_id = r.ask_id AND l.id > r.id) THEN
      r.state_digest := sha256(convert_to(compass_ask_json(r.ask_id)::text, 'UTF8'));
    END IF;
    r.entry_hash := compass_history_hash(prev, r);
    UPDATE ask_history SET state_digest = r.state_digest, entry_hash = r.entry_hash
      WHERE id = r.id;
    prev := r.entry_hash;
  END LOOP;
END
$$;

CREATE TRIGGER ask_history_chained BEFORE INSERT ON ask_history
  FOR EACH ROW EXECUTE FUNCTION compass_chain_history();

-- What verify-history reads: every entry of one workspace, oldest first
-- per ask, with its hash recomputed from the stored hash of the entry
-- before it, and on each ask's last entry whether the ask still stands as
-- that entry recorded; then each ask with no entry at all (id NULL). The
-- operator's command calls it.
CREATE FUNCTION compass_history_check(ws uuid)
RETURNS TABLE (id bigint, ask_id text, kind text, at timestamptz, holds boolean,
               last boolean, state_holds boolean)
LANGUAGE sql STABLE SECURITY DEFINER SET search_path = public, pg_temp AS $$
  SELECT c.id, c.ask_id, c.kind, c.at, c.entry_hash IS NOT DISTINCT FROM c.recomputed, c.last,
         NOT c.last OR c.state_digest IS NOT DISTINCT FROM
           sha256(convert_to(compass_ask_json(c.ask_id)::text, 'UTF8'))
  FROM (
    SELECT h.*, compass_history_hash(lag(h.entry_hash) OVER w, h) AS recomputed,
           lead(h.id) OVER w IS NULL AS last
    FROM ask_history h
    WHERE h.workspace_id = ws
    WINDOW w AS (PARTITION BY h.ask_id ORDER BY h.id)
  ) c
  UNION ALL
  -- An ask whose every entry is gone.
  SELECT NULL, a.ask_id, NULL, NULL, false, true, false
  FROM asks a
  WHERE a.workspace_id = ws
    AND NOT EXISTS (SELECT 1 FROM ask_history h WHERE h.ask_id = a.ask_id)
  ORDER BY 1 NULLS FIRST
$$;
REVOKE ALL ON FUNCTION compass_history_check(uuid) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION compass_history_check(uuid) TO compass_maintenance;

-- --- one ask, once ----------------------------------------------------------

CREATE TABLE post_keys (
  author_id uuid NOT NULL REFERENCES accounts (id),
  client_key text NOT NULL,
  workspace_id uuid NOT NULL REFERENCES workspaces (id),
  message_id uuid NOT NULL REFERENCES messages (id),
  -- What the keyed post said: the same key with another post is refused.
  digest bytea NOT NULL,
  created_at timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (author_id, client_key)
);

-- The prints of open asks; an ask's goes when it ends.
CREATE TABLE ask_prints (
  ask_id text PRIMARY KEY REFERENCES asks (ask_id),
  workspace_id uuid NOT NULL REFERENCES workspaces (id),
  author_id uuid NOT NULL,
  channel_id uuid NOT NULL,
  print bytea NOT NULL
);
CREATE INDEX ask_prints_found ON ask_prints (author_id, channel_id, print);

DO $$
DECLARE
  t text;
BEGIN
  FOREACH t IN ARRAY ARRAY['post_keys', 'ask_prints'] LOOP
    EXECUTE format('ALTER TABLE %I ENABLE ROW LEVEL SECURITY', t);
    EXECUTE format(
      'CREATE POLICY workspace_only ON %I TO compass_app, compass_maintenance, compass_writer '
      'USING (workspace_id = compass_workspace()) WITH CHECK (workspace_id = compass_workspace())',
      t);
  END LOOP;
END
$$;
GRANT SELECT, INSERT ON post_keys, ask_prints TO compass_writer;
GRANT SELECT ON post_keys, ask_prints TO compass_maintenance;

CREATE FUNCTION compass_forget_print() RETURNS trigger
LANGUAGE plpgsql SECURITY DEFINER SET search_path = public, pg_temp AS $$
BEGIN
  DELETE FROM ask_prints WHERE ask_id = NEW.ask_id;
  RETURN NULL;
END
$$;
CREATE TRIGGER ask_prints_ended AFTER INSERT ON ask_history
  FOR EACH ROW
  WHEN (NEW.kind IN ('answered', 'withdrawn_by_agent', 'withdrawn_by_owner', 'declined', 'expired'))
  EXECUTE FUNCTION compass_forget_print();

-- A message posted before, as a post's result that posted nothing.
CREATE FUNCTION compass_post_prior(id uuid, outcome text) RETURNS jsonb
LANGUAGE sql STABLE AS $$
  SELECT jsonb_build_object('message', compass_message_json(m, acc.handle), 'numbered', true,
                            'outcome', outcome, 'read_at', clock_timestamp())
  FROM messages m JOIN accounts acc ON acc.id = m.author_id
  WHERE m.id = compass_post_prior.id
$$;

-- Items: compass_post_messages' (0020), each with optionally `client_key`
-- and `digest` (hex), and `print` (hex) for a post of one ask that may be
-- answered by an open one. Returns each item's result in the items' order:
-- compass_post_message's, with `outcome` 'posted'; or a message posted
-- before with `outcome` 'repeated' (its key) or 'already_open' (its print);
-- or {key_reused: message id} when the key posted something else. Authors'
-- rows are locked in id order before anything is read, as the posts
-- themselves lock them, so the same key (or print) racing posts once.
CREATE FUNCTION compass_posts_once(items jsonb) RETURNS jsonb
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
          PERFORM set_config('compass.writer_workspace', ws::text, true);
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
          PERFORM set_config('compass.writer_workspace', ws::text, true);
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

-- Handed to compass_writer as the other write functions are (0019): it
-- runs with that role's rights, and only compass_app calls it.
GRANT CREATE ON SCHEMA public TO compass_writer;
ALTER FUNCTION compass_posts_once(jsonb) OWNER TO compass_writer;
REVOKE CREATE ON SCHEMA public FROM compass_writer;
REVOKE ALL ON FUNCTION compass_posts_once(jsonb) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION compass_posts_once(jsonb) TO compass_app;
