-- after: 0012

-- The operator's commands name endpoints and deliveries by id too.
CREATE OR REPLACE FUNCTION compass_workspace_of(object_id uuid) RETURNS uuid
LANGUAGE sql STABLE SECURITY DEFINER SET search_path = public AS $$
  SELECT workspace_id FROM (
    SELECT workspace_id FROM accounts WHERE id = object_id
    UNION ALL SELECT workspace_id FROM runners WHERE id = object_id
    UNION ALL SELECT workspace_id FROM credentials WHERE id = object_id
    UNION ALL SELECT workspace_id FROM webhook_endpoints WHERE id = object_id
    UNION ALL SELECT workspace_id FROM webhook_deliveries WHERE id = object_id
  ) found LIMIT 1
$$;
REVOKE ALL ON FUNCTION compass_workspace_of(object_id uuid) FROM PUBLIC, compass_app, compass_maintenance, compass_writer;
GRANT EXECUTE ON FUNCTION compass_workspace_of(object_id uuid) TO compass_maintenance;
