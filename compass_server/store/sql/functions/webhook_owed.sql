-- after: 0020

-- Whether an event is owed to an endpoint of these types, a follow-up step of an open
-- ask (ask.reminded, ask.escalated) among the updates that make a delivery.
-- A quorum ask's update is counted as its vote.
CREATE OR REPLACE FUNCTION compass_webhook_owed(kind text, payload jsonb, types text[])
RETURNS integer
LANGUAGE sql IMMUTABLE AS $$
  SELECT CASE kind
    WHEN 'message_posted' THEN (
      SELECT count(*)::integer FROM jsonb_array_elements(payload -> 'blocks') b
      WHERE b ->> 'kind' = 'ask' AND (cardinality(types) = 0 OR 'ask.posted' = ANY (types)))
    WHEN 'message_updated' THEN (
      SELECT least(count(*), 1)::integer FROM jsonb_array_elements(payload -> 'blocks') b
      WHERE b ->> 'kind' = 'ask'
        AND (cardinality(types) = 0 OR CASE
          WHEN NOT b -> 'ask' ? 'ending' THEN
            CASE WHEN b -> 'ask' ? 'quorum_votes' THEN 'ask.voted'
                 WHEN b -> 'ask' ? 'follow_up_steps'
                   THEN 'ask.' || (b -> 'ask' -> 'follow_up_steps' -> -1 ->> 'kind')
            END
          ELSE CASE b -> 'ask' -> 'ending' ->> 'kind'
            WHEN 'answered' THEN 'ask.answered'
            WHEN 'declined' THEN 'ask.declined'
            WHEN 'expired' THEN 'ask.expired'
            ELSE 'ask.withdrawn' END
          END = ANY (types))
        AND (b -> 'ask' ? 'ending' OR b -> 'ask' ? 'quorum_votes'
             OR b -> 'ask' ? 'follow_up_steps'))
    WHEN 'inbox_item_changed' THEN (
      SELECT CASE WHEN cardinality(types) > 0 AND NOT ('inbox.item.' || status) = ANY (types)
                  THEN 0
                  WHEN status = 'open' AND (message IS NULL OR asks) THEN 1
                  WHEN status = 'answered' AND answers THEN 1
                  WHEN status = 'closed' AND (message IS NULL OR asks) THEN 1
                  ELSE 0 END
      FROM (SELECT payload ->> 'status' AS status,
                   nullif(payload -> 'message', 'null') AS message,
                   coalesce(payload -> 'message' -> 'blocks' @> '[{"kind": "ask"}]', false) AS asks,
                   coalesce(payload -> 'message' -> 'blocks' @> '[{"kind": "ask_answer"}]', false)
                     AS answers) AS change)
    ELSE 0
  END
$$;
REVOKE ALL ON FUNCTION compass_webhook_owed(kind text, payload jsonb, types text[]) FROM PUBLIC, compass_app, compass_maintenance, compass_writer;
GRANT EXECUTE ON FUNCTION compass_webhook_owed(kind text, payload jsonb, types text[]) TO PUBLIC;
