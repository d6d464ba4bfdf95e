-- after: 0003

CREATE OR REPLACE FUNCTION compass_ask_state(ask text, actor uuid) RETURNS jsonb
LANGUAGE sql STABLE AS $$
  SELECT jsonb_build_object(
    'message_id', m.id,
    'author_id', m.author_id,
    'ask', (SELECT b -> 'ask' FROM jsonb_array_elements(m.blocks) b
            WHERE b ->> 'kind' = 'ask' AND b -> 'ask' ->> 'ask_id' = ask))
  FROM asks a
  JOIN messages m ON m.id = a.message_id
  WHERE a.ask_id = ask
    AND (EXISTS (SELECT 1 FROM channel_members cm
                 WHERE cm.channel_id = m.channel_id AND cm.account_id = actor)
         OR EXISTS (SELECT 1 FROM compass_participation p
                    WHERE p.account_id = actor AND p.channel_id = m.channel_id))
$$;
REVOKE ALL ON FUNCTION compass_ask_state(ask text, actor uuid) FROM PUBLIC, compass_app, compass_maintenance, compass_writer;
GRANT EXECUTE ON FUNCTION compass_ask_state(ask text, actor uuid) TO PUBLIC;
