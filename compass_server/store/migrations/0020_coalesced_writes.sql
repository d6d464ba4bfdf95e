-- Coalesced writes: the posts (or the ask endings) a server has waiting
-- while one of their kind is at the database go together as one statement,
-- one transaction, one commit. Each item runs the function it would run
-- alone, under its own credential and actor, and keeps its own outcome: a
-- refusal is a status in its slot, never an error for its neighbours.
--
-- Lock order, so batches can't deadlock with each other, with lone writes
-- or with the expiry sweep: asks' messages first (in ask id order), then
-- agents' rows in id order. A post locks only its author's row; an ending
-- locks its ask's message, then the asking agent's row. Locking the messages
-- runs as compass_writer, as the endings themselves do (0019).

-- Items: [{cred (hex), id, channel_id, author_id, blocks, search_text,
-- ask_ids, due, surface}]; returns each item's compass_post_message result,
-- in the items' order.
CREATE FUNCTION compass_post_messages(items jsonb) RETURNS jsonb
LANGUAGE plpgsql AS $$
DECLARE
  results jsonb[] := array_fill(NULL::jsonb, ARRAY[jsonb_array_length(items)]);
  it record;
BEGIN
  FOR it IN
    SELECT x.item, x.n FROM jsonb_array_elements(items) WITH ORDINALITY AS x (item, n)
    ORDER BY (x.item ->> 'author_id')::uuid, x.n
  LOOP
    results[it.n] := compass_post_message(
      decode(it.item ->> 'cred', 'hex'), (it.item ->> 'id')::uuid,
      (it.item ->> 'channel_id')::uuid, (it.item ->> 'author_id')::uuid, it.item -> 'blocks',
      it.item ->> 'search_text',
      ARRAY(SELECT jsonb_array_elements_text(it.item -> 'ask_ids')),
      ARRAY(SELECT d::timestamptz FROM jsonb_array_elements_text(it.item -> 'due') AS d),
      it.item ->> 'surface');
  END LOOP;
  RETURN to_jsonb(results);
END
$$;

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

-- Items: [{cred (hex), actor, ask_id, surface} with either {answered,
-- answer_id} (an answer) or {kind, reason} (any other ending)]; returns each
-- item's compass_answer_ask or compass_end_ask result, in the items' order.
CREATE FUNCTION compass_end_asks(items jsonb) RETURNS jsonb
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
