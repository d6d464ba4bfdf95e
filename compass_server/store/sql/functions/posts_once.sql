-- after: 0025

-- A batch of posts writes each item's keys under that item's credential.
CREATE OR REPLACE FUNCTION compass_posts_once(items jsonb) RETURNS jsonb
LANGUAGE plpgsql SECURITY DEFINER SET search_path = public, pg_temp AS $$
DECLARE
  proof record;
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
    proof := compass_proof(decode(it.item ->> 'cred', 'hex'), author);
    ws := proof.ws;
    scopes[it.n] := ws;
    IF ws IS NULL OR NOT proof.vouched THEN
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
GRANT CREATE ON SCHEMA public TO compass_writer;
ALTER FUNCTION compass_posts_once(items jsonb) OWNER TO compass_writer;
REVOKE CREATE ON SCHEMA public FROM compass_writer;
REVOKE ALL ON FUNCTION compass_posts_once(items jsonb) FROM PUBLIC, compass_app, compass_maintenance;
GRANT EXECUTE ON FUNCTION compass_posts_once(items jsonb) TO compass_app;
