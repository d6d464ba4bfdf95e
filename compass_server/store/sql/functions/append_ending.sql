-- after: 0008

-- Appends an ending's events to workspace `ws`: the ask's MessageUpdated,
-- the answer's MessagePosted when there is one, and the agent's presence
-- change when it moved. Returns the last event id, NULL when they are left
-- to number after commit.
CREATE OR REPLACE FUNCTION compass_append_ending(
  ws uuid, channel uuid, ask_msg jsonb, change jsonb, answer_msg jsonb DEFAULT NULL
) RETURNS bigint
LANGUAGE plpgsql AS $$
DECLARE
  kinds text[] := ARRAY['message_updated'];
  channels uuid[] := ARRAY[channel];
  payloads jsonb[] := ARRAY[ask_msg];
BEGIN
  IF answer_msg IS NOT NULL THEN
    kinds := kinds || 'message_posted'::text;
    channels := channels || channel;
    payloads := payloads || answer_msg;
  END IF;
  IF change IS NOT NULL THEN
    kinds := kinds || 'presence_changed'::text;
    channels := channels || NULL::uuid;
    payloads := payloads || change;
  END IF;
  RETURN compass_append_events_to(ws, kinds, channels, payloads);
END
$$;
REVOKE ALL ON FUNCTION compass_append_ending(ws uuid, channel uuid, ask_msg jsonb, change jsonb, answer_msg jsonb) FROM PUBLIC, compass_app, compass_maintenance, compass_writer;
GRANT EXECUTE ON FUNCTION compass_append_ending(ws uuid, channel uuid, ask_msg jsonb, change jsonb, answer_msg jsonb) TO PUBLIC;
