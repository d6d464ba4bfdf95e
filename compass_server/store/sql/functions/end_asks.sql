-- after: 0019

-- Endings coalesced into one statement: every ask's message locked first, in
-- ask id order, then each ending in the order of the agents' rows it
-- updates, so two batches never wait on each other.
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
        (it.item ->> 'answer_id')::uuid, it.item ->> 'surface',
        nullif(it.item -> 'standing', 'null'::jsonb));
    ELSE
      results[it.n] := compass_end_ask(cred, actor, it.item ->> 'ask_id', it.item ->> 'kind',
        it.item ->> 'surface', it.item ->> 'reason');
    END IF;
  END LOOP;
  RETURN to_jsonb(results);
END
$$;
REVOKE ALL ON FUNCTION compass_end_asks(items jsonb) FROM PUBLIC, compass_app, compass_maintenance, compass_writer;
GRANT EXECUTE ON FUNCTION compass_end_asks(items jsonb) TO PUBLIC;
