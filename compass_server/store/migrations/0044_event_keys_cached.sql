-- An event's keys (the generated column of 0039) are computed on every event
-- insert. As a SQL function with a sub-select, compass_event_keys was not
-- inlined and was planned again for every insert statement (as 0034 found
-- of compass_ask_json); in PL/pgSQL its one query is planned once per
-- connection. Same keys, in the same order, for every kind.
CREATE OR REPLACE FUNCTION compass_event_keys(kind text, channel_id uuid, payload jsonb)
RETURNS uuid[]
LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE AS $$
DECLARE
  named uuid;
BEGIN
  IF kind = 'inbox_item_changed' THEN
    named := (payload ->> 'agent_id')::uuid;
  ELSIF kind = 'message_updated' THEN
    named := (payload ->> 'author_id')::uuid;
  ELSIF kind = 'agent_moved' THEN
    named := (payload ->> 'account_id')::uuid;
  ELSIF kind = 'channel_changed' THEN
    RETURN array_remove(
      ARRAY[channel_id]
        || ARRAY(SELECT m::uuid FROM jsonb_array_elements_text(payload -> 'member_ids') AS m),
      NULL);
  END IF;
  RETURN array_remove(ARRAY[channel_id, named], NULL);
END
$$;
