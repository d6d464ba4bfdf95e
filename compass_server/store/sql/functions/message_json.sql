-- after: 0003

-- A message row as the event log and the store read it.
CREATE OR REPLACE FUNCTION compass_message_json(m messages, handle text) RETURNS jsonb
LANGUAGE sql STABLE AS $$
  SELECT jsonb_build_object(
    'message_id', m.id, 'channel_id', m.channel_id, 'author_id', m.author_id,
    'author_handle', handle, 'blocks', m.blocks, 'created_at', m.created_at,
    'position', m.position)
$$;
REVOKE ALL ON FUNCTION compass_message_json(m messages, handle text) FROM PUBLIC, compass_app, compass_maintenance, compass_writer;
GRANT EXECUTE ON FUNCTION compass_message_json(m messages, handle text) TO PUBLIC;
