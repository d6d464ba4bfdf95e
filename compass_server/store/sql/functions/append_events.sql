-- after: 0001

CREATE OR REPLACE FUNCTION compass_append_events(kinds text[], channel_ids uuid[], payloads jsonb[])
RETURNS bigint
LANGUAGE sql AS $$
  SELECT compass_append_events_to(compass_workspace(), kinds, channel_ids, payloads)
$$;
REVOKE ALL ON FUNCTION compass_append_events(kinds text[], channel_ids uuid[], payloads jsonb[]) FROM PUBLIC, compass_app, compass_maintenance, compass_writer;
GRANT EXECUTE ON FUNCTION compass_append_events(kinds text[], channel_ids uuid[], payloads jsonb[]) TO PUBLIC;
