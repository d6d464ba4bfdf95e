-- after: 0003

CREATE OR REPLACE FUNCTION compass_lock_ask(ask text, actor uuid, OUT m messages, OUT idx int)
LANGUAGE plpgsql AS $$
BEGIN
  SELECT msg.* INTO m FROM asks a
    JOIN messages msg ON msg.id = a.message_id
    WHERE a.ask_id = ask
      AND (EXISTS (SELECT 1 FROM channel_members cm
                   WHERE cm.channel_id = msg.channel_id AND cm.account_id = actor)
           OR EXISTS (SELECT 1 FROM compass_participation p
                      WHERE p.account_id = actor AND p.channel_id = msg.channel_id))
    FOR UPDATE OF msg;
  IF m.id IS NULL THEN
    RETURN;
  END IF;
  SELECT i - 1 INTO idx FROM jsonb_array_elements(m.blocks) WITH ORDINALITY AS b(block, i)
    WHERE block ->> 'kind' = 'ask' AND block -> 'ask' ->> 'ask_id' = ask;
END
$$;
REVOKE ALL ON FUNCTION compass_lock_ask(ask text, actor uuid, OUT m messages, OUT idx integer) FROM PUBLIC, compass_app, compass_maintenance, compass_writer;
GRANT EXECUTE ON FUNCTION compass_lock_ask(ask text, actor uuid, OUT m messages, OUT idx integer) TO PUBLIC;
