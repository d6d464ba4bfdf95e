-- after: 0039

-- Delivery cursors saved together by a stopping server, across workspaces:
-- each only moves forward.
CREATE OR REPLACE FUNCTION compass_save_cursors(agent_ids uuid[], event_ids bigint[])
RETURNS void
LANGUAGE sql SECURITY DEFINER SET search_path = public AS $$
  UPDATE delivery_cursors d SET acked_event_id = greatest(d.acked_event_id, x.event_id)
  FROM unnest(agent_ids, event_ids) AS x (agent_id, event_id)
  WHERE d.agent_id = x.agent_id
$$;
REVOKE ALL ON FUNCTION compass_save_cursors(agent_ids uuid[], event_ids bigint[]) FROM PUBLIC, compass_app, compass_maintenance, compass_writer;
GRANT EXECUTE ON FUNCTION compass_save_cursors(agent_ids uuid[], event_ids bigint[]) TO compass_maintenance;
