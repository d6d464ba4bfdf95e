-- after: 0021

-- Mints a link to one ask for one person of a workspace (the surfaces that
-- notify people run as compass_maintenance, as the operator does): the ask must be
-- open; a person it names, or, when it names nobody, a person in its channel
-- (the one a notification is being sent to). Returns 'minted', or why not:
-- 'no_ask', 'ended', 'no_person', 'not_named'.
CREATE OR REPLACE FUNCTION compass_mint_link(
  ws uuid, ask text, person uuid, digest bytea, link uuid, lifetime interval
) RETURNS text
LANGUAGE plpgsql SECURITY DEFINER SET search_path = public AS $$
DECLARE
  m messages%ROWTYPE;
  stored jsonb;
BEGIN
  SELECT msg.* INTO m FROM asks k JOIN messages msg ON msg.id = k.message_id
  WHERE k.ask_id = ask AND k.workspace_id = ws;
  IF NOT FOUND THEN
    RETURN 'no_ask';
  END IF;
  SELECT b.block -> 'ask' INTO stored FROM jsonb_array_elements(m.blocks) AS b(block)
  WHERE b.block ->> 'kind' = 'ask' AND b.block -> 'ask' ->> 'ask_id' = ask;
  IF compass_ask_standing(stored) <> 'open' THEN
    RETURN 'ended';
  END IF;
  IF NOT EXISTS (SELECT 1 FROM accounts a WHERE a.id = person AND a.workspace_id = ws
                 AND a.kind = 'human' AND a.deactivated_at IS NULL) THEN
    RETURN 'no_person';
  END IF;
  IF NOT compass_may_answer(stored, person) OR NOT EXISTS (
      SELECT 1 FROM channel_members cm WHERE cm.channel_id = m.channel_id
        AND cm.account_id = person) THEN
    RETURN 'not_named';
  END IF;
  INSERT INTO credentials (token_hash, id, workspace_id, account_id, label, expires_at, kind, ask_id)
  VALUES (digest, link, ws, person, 'one-ask link', now() + lifetime, 'link', ask);
  RETURN 'minted';
END
$$;
REVOKE ALL ON FUNCTION compass_mint_link(ws uuid, ask text, person uuid, digest bytea, link uuid, lifetime interval) FROM PUBLIC, compass_app, compass_maintenance, compass_writer;
GRANT EXECUTE ON FUNCTION compass_mint_link(ws uuid, ask text, person uuid, digest bytea, link uuid, lifetime interval) TO compass_maintenance;
