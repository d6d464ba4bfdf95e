-- after: 0001

CREATE OR REPLACE FUNCTION compass_presence_change(agent uuid, opened integer DEFAULT 0) RETURNS jsonb
LANGUAGE plpgsql AS $$
DECLARE
  acct accounts%ROWTYPE;
  next_state text;
BEGIN
  -- NO KEY UPDATE (what an UPDATE takes): compatible with the key-share
  -- locks of rows referencing it.
  SELECT * INTO acct FROM accounts WHERE id = agent AND kind = 'agent' FOR NO KEY UPDATE;
  IF NOT FOUND THEN
    RETURN NULL;
  END IF;
  acct.open_asks := acct.open_asks + opened;
  IF acct.open_asks > 0
     OR EXISTS (SELECT 1 FROM inbox_items i WHERE i.agent_id = agent AND i.status = 'open') THEN
    next_state := 'waiting';
  ELSIF NOT EXISTS (SELECT 1 FROM agent_sessions s WHERE s.agent_id = agent) THEN
    next_state := 'offline';
  ELSE
    next_state := acct.status;
  END IF;
  IF next_state = acct.presence_state AND acct.status_text = acct.presence_text THEN
    IF opened <> 0 THEN
      UPDATE accounts SET open_asks = open_asks + opened WHERE id = agent;
    END IF;
    RETURN NULL;
  END IF;
  UPDATE accounts
    SET open_asks = open_asks + opened, presence_state = next_state,
        presence_text = acct.status_text
    WHERE id = agent;
  RETURN jsonb_build_object('account_id', agent, 'state', next_state, 'status_text', acct.status_text);
END
$$;
REVOKE ALL ON FUNCTION compass_presence_change(agent uuid, opened integer) FROM PUBLIC, compass_app, compass_maintenance, compass_writer;
GRANT EXECUTE ON FUNCTION compass_presence_change(agent uuid, opened integer) TO PUBLIC;
