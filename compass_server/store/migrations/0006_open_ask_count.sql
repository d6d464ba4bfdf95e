-- WAITING from a count kept on the agent's row, not a search of its messages:
-- the search read every dead index entry of the asks answered since the last
-- vacuum (0.8 ms of a 1.3 ms post under load), twice per lifecycle. Posts add
-- their asks, answers and cancels take one off, all under the row lock that
-- the presence recompute takes anyway. Members never leave channels, so every
-- open ask an agent authored is in a channel it belongs to.
ALTER TABLE accounts ADD COLUMN open_asks integer NOT NULL DEFAULT 0
  CHECK (open_asks >= 0);

UPDATE accounts a SET open_asks = (
  SELECT count(*) FROM messages m, jsonb_array_elements(m.blocks) AS b(block)
  WHERE m.author_id = a.id AND block ->> 'kind' = 'ask'
    AND NOT coalesce((block -> 'ask' ->> 'answered')::boolean, false)
    AND NOT coalesce((block -> 'ask' ->> 'cancelled')::boolean, false))
WHERE a.kind = 'agent';

DROP INDEX messages_open_asks;

-- The ask writes of migration 0004, now moving the count, and saying whether
-- their events were numbered (else the caller has them numbered after commit).
