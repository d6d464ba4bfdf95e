-- after: 0020

-- Expires a locked, open ask of workspace `ws`: its ending, the agent's
-- presence and the events. The one way an ask expires, for the sweep and
-- for an ending that came too late. Returns {status: expired, ask_message,
-- numbered}.
CREATE OR REPLACE FUNCTION compass_expire_locked(ws uuid, m messages, idx int) RETURNS jsonb
LANGUAGE plpgsql AS $$
DECLARE
  ask_msg jsonb;
  last_id bigint;
BEGIN
  ask_msg := compass_write_ending(m, idx, 'expired', NULL, 'server', NULL);
  last_id := compass_append_ending(
    ws, m.channel_id, ask_msg, compass_presence_change(m.author_id, -1));
  RETURN jsonb_build_object('status', 'expired', 'ask_message', ask_msg,
    'numbered', last_id IS NOT NULL);
END
$$;
REVOKE ALL ON FUNCTION compass_expire_locked(ws uuid, m messages, idx integer) FROM PUBLIC, compass_app, compass_maintenance, compass_writer;
GRANT EXECUTE ON FUNCTION compass_expire_locked(ws uuid, m messages, idx integer) TO PUBLIC;
