-- An open inbox ask is a question a person must answer, just like an open
-- channel ask: the agent is WAITING while either kind is open. Inbox writes
-- that open or settle an item recompute presence under the agent's row lock,
-- which they take before the item's.
CREATE OR REPLACE FUNCTION compass_presence_change(agent uuid, opened integer DEFAULT 0) RETURNS jsonb
LANGUAGE plpgsql AS $$
DECLARE
  acct accounts%ROWTYPE;
  next_state text;
BEGIN
  -- NO KEY UPDATE (what an UPDATE takes): compatible with the key-share
  -- locks of rows referencing it.
  IF opened = 0 THEN
    SELECT * INTO acct FROM accounts WHERE id = agent AND kind = 'agent' FOR NO KEY UPDATE;
  ELSE
    UPDATE accounts SET open_asks = open_asks + opened
      WHERE id = agent AND kind = 'agent' RETURNING * INTO acct;
  END IF;
  IF NOT FOUND THEN
    RETURN NULL;
  END IF;
  IF acct.open_asks > 0
     OR EXISTS (SELECT 1 FROM inbox_items i WHERE i.agent_id = agent AND i.status = 'open') THEN
    next_state := 'waiting';
  ELSIF NOT EXISTS (SELECT 1 FROM agent_sessions s WHERE s.agent_id = agent) THEN
    next_state := 'offline';
  ELSE
    next_state := acct.status;
  END IF;
  IF next_state = acct.presence_state AND acct.status_text = acct.presence_text THEN
    RETURN NULL;
  END IF;
  UPDATE accounts SET presence_state = next_state, presence_text = acct.status_text
    WHERE id = agent;
  RETURN jsonb_build_object('account_id', agent, 'state', next_state, 'status_text', acct.status_text);
END
$$;

-- Agents with an open inbox item wait from now on.
SELECT compass_presence_change(a.id)
FROM accounts a
WHERE a.kind = 'agent'
  AND EXISTS (SELECT 1 FROM inbox_items i WHERE i.agent_id = a.id AND i.status = 'open');
