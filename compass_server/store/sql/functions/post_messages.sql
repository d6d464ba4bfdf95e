-- after: 0019

-- Items: [{cred (hex), id, channel_id, author_id, blocks, search_text,
-- ask_ids, due, surface}]; returns each item's compass_post_message result,
-- in the items' order.
CREATE OR REPLACE FUNCTION compass_post_messages(items jsonb) RETURNS jsonb
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
REVOKE ALL ON FUNCTION compass_post_messages(items jsonb) FROM PUBLIC, compass_app, compass_maintenance, compass_writer;
GRANT EXECUTE ON FUNCTION compass_post_messages(items jsonb) TO PUBLIC;
