-- after: 0003

CREATE OR REPLACE FUNCTION compass_lock_ask(ask text, actor uuid, OUT m messages, OUT idx int)
LANGUAGE plpgsql AS $$
DECLARE
  found_ask record;
BEGIN
  -- The row and the ask's place in it, in one statement.
  SELECT msg AS msg,
         (SELECT b.i - 1 FROM jsonb_array_elements(msg.blocks) WITH ORDINALITY AS b (block, i)
          WHERE b.block ->> 'kind' = 'ask' AND b.block -> 'ask' ->> 'ask_id' = ask) AS idx
    INTO found_ask
    FROM asks a
    JOIN messages msg ON msg.id = a.message_id
    WHERE a.ask_id = ask
      AND (EXISTS (SELECT 1 FROM channel_members cm
                   WHERE cm.channel_id = msg.channel_id AND cm.account_id = actor)
           OR EXISTS (SELECT 1 FROM compass_participation p
                      WHERE p.account_id = actor AND p.channel_id = msg.channel_id))
    FOR UPDATE OF msg;
  IF found_ask IS NULL OR (found_ask.msg).id IS NULL THEN
    RETURN;
  END IF;
  m := found_ask.msg;
  idx := found_ask.idx;
END
$$;
REVOKE ALL ON FUNCTION compass_lock_ask(ask text, actor uuid, OUT m messages, OUT idx integer) FROM PUBLIC, compass_app, compass_maintenance, compass_writer;
GRANT EXECUTE ON FUNCTION compass_lock_ask(ask text, actor uuid, OUT m messages, OUT idx integer) TO PUBLIC;
