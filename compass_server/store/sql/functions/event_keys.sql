-- after: 0038

-- An event's keys (events.keys, a generated column) are computed on every
-- event insert. In PL/pgSQL its one query is planned once per connection; a
-- SQL function with a sub-select is not inlined and was planned again for
-- every insert. Same keys, in the same order, for every kind.
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
REVOKE ALL ON FUNCTION compass_event_keys(kind text, channel_id uuid, payload jsonb) FROM PUBLIC, compass_app, compass_maintenance, compass_writer;
GRANT EXECUTE ON FUNCTION compass_event_keys(kind text, channel_id uuid, payload jsonb) TO PUBLIC;
