-- after: 0008

-- The expiry sweep: up to `batch` open asks past their deadline, in any
-- workspace, each expired through compass_expire_locked.
CREATE OR REPLACE FUNCTION compass_expire_due_asks(batch int) RETURNS jsonb
LANGUAGE plpgsql SECURITY DEFINER SET search_path = public AS $$
DECLARE
  due record;
  m messages%ROWTYPE;
  idx int;
  result jsonb;
  expired int := 0;
  unnumbered uuid[] := '{}';
BEGIN
  FOR due IN
    SELECT d.ask_id, d.workspace_id, d.message_id FROM (
      SELECT a.ask_id, a.workspace_id, a.message_id, msg.author_id
      FROM asks a JOIN messages msg ON msg.id = a.message_id
      WHERE a.due_at <= now()
      ORDER BY a.due_at
      LIMIT batch
      FOR UPDATE OF msg SKIP LOCKED
    ) d
    ORDER BY d.author_id, d.ask_id
  LOOP
    SELECT * INTO m FROM messages WHERE id = due.message_id;
    SELECT i - 1 INTO idx FROM jsonb_array_elements(m.blocks) WITH ORDINALITY AS b(block, i)
      WHERE block ->> 'kind' = 'ask' AND block -> 'ask' ->> 'ask_id' = due.ask_id;
    IF compass_ask_standing(m.blocks -> idx -> 'ask') <> 'open' THEN
      UPDATE asks SET due_at = NULL WHERE ask_id = due.ask_id;
      CONTINUE;
    END IF;
    result := compass_expire_locked(due.workspace_id, m, idx);
    expired := expired + 1;
    IF NOT (result ->> 'numbered')::boolean AND NOT due.workspace_id = ANY(unnumbered) THEN
      unnumbered := unnumbered || due.workspace_id;
    END IF;
  END LOOP;
  RETURN jsonb_build_object('expired', expired, 'unnumbered', to_jsonb(unnumbered));
END
$$;
REVOKE ALL ON FUNCTION compass_expire_due_asks(batch integer) FROM PUBLIC, compass_app, compass_maintenance, compass_writer;
GRANT EXECUTE ON FUNCTION compass_expire_due_asks(batch integer) TO compass_maintenance;
