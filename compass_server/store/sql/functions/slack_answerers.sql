-- after: 0029

-- The handles an ask of workspace ws names as its answerers, in order.
CREATE OR REPLACE FUNCTION compass_slack_answerers(ws uuid, ask text)
RETURNS TABLE (handle text)
LANGUAGE sql STABLE SECURITY DEFINER SET search_path = public AS $$
  SELECT a.handle
  FROM asks k
  JOIN messages m ON m.id = k.message_id
  CROSS JOIN LATERAL jsonb_array_elements(m.blocks) b
  CROSS JOIN LATERAL jsonb_array_elements_text(b -> 'ask' -> 'answerer_ids')
    WITH ORDINALITY x (id, n)
  JOIN accounts a ON a.id = x.id::uuid
  WHERE k.ask_id = ask AND k.workspace_id = ws
    AND b ->> 'kind' = 'ask' AND b -> 'ask' ->> 'ask_id' = k.ask_id
  ORDER BY x.n
$$;
REVOKE ALL ON FUNCTION compass_slack_answerers(ws uuid, ask text) FROM PUBLIC, compass_app, compass_maintenance, compass_writer;
GRANT EXECUTE ON FUNCTION compass_slack_answerers(ws uuid, ask text) TO compass_maintenance;
