-- A batch of ask endings (0019) locks its asks' messages first, each as the
-- account that ends it would see it. Like the endings themselves (0020),
-- that runs as compass_writer: one proof of the credential and the account,
-- and the participation check once, not again by the policies.

-- The ask's message locked for `actor`, if its credential vouches for it and
-- it takes part in the channel; returns the asking agent (NULL: none of that).
CREATE FUNCTION compass_lock_ask_for(cred bytea, actor uuid, ask text) RETURNS uuid
LANGUAGE plpgsql SECURITY DEFINER SET search_path = public, pg_temp AS $$
BEGIN
  IF compass_writer_scope(cred, actor) IS NULL OR NOT compass_vouched(actor) THEN
    RETURN NULL;
  END IF;
  RETURN (SELECT (l.m).author_id FROM compass_lock_ask(ask, actor) l);
END
$$;
GRANT CREATE ON SCHEMA public TO compass_writer;
ALTER FUNCTION compass_lock_ask_for(bytea, uuid, text) OWNER TO compass_writer;
REVOKE CREATE ON SCHEMA public FROM compass_writer;
REVOKE ALL ON FUNCTION compass_lock_ask_for(bytea, uuid, text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION compass_lock_ask_for(bytea, uuid, text) TO compass_app;

CREATE OR REPLACE FUNCTION compass_end_asks(items jsonb) RETURNS jsonb
LANGUAGE plpgsql AS $$
DECLARE
  n int := jsonb_array_length(items);
  results jsonb[] := array_fill(NULL::jsonb, ARRAY[n]);
  askers uuid[] := array_fill(NULL::uuid, ARRAY[n]);
  it record;
  cred bytea;
  actor uuid;
BEGIN
  -- Every message first, in ask id order.
  FOR it IN
    SELECT x.item, x.n FROM jsonb_array_elements(items) WITH ORDINALITY AS x (item, n)
    ORDER BY x.item ->> 'ask_id', x.n
  LOOP
    askers[it.n] := compass_lock_ask_for(
      decode(it.item ->> 'cred', 'hex'), (it.item ->> 'actor')::uuid, it.item ->> 'ask_id');
  END LOOP;
  -- Then the endings, in the order of the agents' rows they update.
  FOR it IN
    SELECT x.item, x.n FROM jsonb_array_elements(items) WITH ORDINALITY AS x (item, n)
    ORDER BY askers[x.n], x.item ->> 'ask_id', x.n
  LOOP
    cred := decode(it.item ->> 'cred', 'hex');
    actor := (it.item ->> 'actor')::uuid;
    IF it.item ? 'answered' THEN
      results[it.n] := compass_answer_ask(cred, actor, it.item ->> 'ask_id', it.item -> 'answered',
        (it.item ->> 'answer_id')::uuid, it.item ->> 'surface');
    ELSE
      results[it.n] := compass_end_ask(cred, actor, it.item ->> 'ask_id', it.item ->> 'kind',
        it.item ->> 'surface', it.item ->> 'reason');
    END IF;
  END LOOP;
  RETURN to_jsonb(results);
END
$$;
