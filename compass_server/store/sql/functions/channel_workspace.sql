-- after: 0035

-- For the operator's command line: the workspace a channel belongs to.
CREATE OR REPLACE FUNCTION compass_channel_workspace(channel uuid) RETURNS uuid
LANGUAGE sql STABLE SECURITY DEFINER SET search_path = public AS $$
  SELECT workspace_id FROM channels WHERE id = channel
$$;
REVOKE ALL ON FUNCTION compass_channel_workspace(channel uuid) FROM PUBLIC, compass_app, compass_maintenance, compass_writer;
GRANT EXECUTE ON FUNCTION compass_channel_workspace(channel uuid) TO compass_maintenance;
