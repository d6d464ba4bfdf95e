-- after: 0001

-- An agent's count of open asks moved by `opened`, and its presence with it:
-- WAITING while it has an open ask (or an open inbox item), OFFLINE with no
-- session, else its own status. Returns the change to announce, NULL when
-- nothing shows differently. One statement: the row locked (NO KEY UPDATE,
-- as an UPDATE takes it: compatible with the key-share locks of rows
-- referencing it), the state worked out, the row written.
CREATE OR REPLACE FUNCTION compass_presence_change(agent uuid, opened integer DEFAULT 0) RETURNS jsonb
LANGUAGE plpgsql AS $$
DECLARE
  changed jsonb;
BEGIN
  WITH was AS (
    SELECT a.id, a.open_asks, a.presence_state, a.presence_text, a.status, a.status_text
    FROM accounts a WHERE a.id = agent AND a.kind = 'agent' FOR NO KEY UPDATE
  ), next AS (
    SELECT was.*,
      CASE
        WHEN was.open_asks + opened > 0
          OR EXISTS (SELECT 1 FROM inbox_items i WHERE i.agent_id = agent AND i.status = 'open')
          THEN 'waiting'
        WHEN NOT EXISTS (SELECT 1 FROM agent_sessions s WHERE s.agent_id = agent)
          THEN 'offline'
        ELSE was.status
      END AS state
    FROM was
  ), written AS (
    UPDATE accounts a
      SET open_asks = a.open_asks + opened, presence_state = next.state,
          presence_text = next.status_text
      FROM next
      WHERE a.id = next.id
        AND (opened <> 0 OR next.state IS DISTINCT FROM next.presence_state
             OR next.status_text IS DISTINCT FROM next.presence_text)
      RETURNING a.id
  )
  SELECT CASE
           WHEN next.state = next.presence_state AND next.status_text = next.presence_text
             THEN NULL
           ELSE jsonb_build_object('account_id', agent, 'state', next.state,
                                   'status_text', next.status_text)
         END
    INTO changed
    FROM next LEFT JOIN written ON written.id = next.id;
  RETURN changed;
END
$$;
REVOKE ALL ON FUNCTION compass_presence_change(agent uuid, opened integer) FROM PUBLIC, compass_app, compass_maintenance, compass_writer;
GRANT EXECUTE ON FUNCTION compass_presence_change(agent uuid, opened integer) TO PUBLIC;
