-- after: 0040

-- What an account takes part in, read through the members' and the
-- accounts' indexes. Read at every bind and every Subscribe: the view's plan
-- found the accounts above the member in its chain by scanning every
-- account of the workspace (row security keeps a condition on a slice of
-- the chain, not leakproof, from being an index condition), and with
-- statistics taken while channel_members was small it read that whole table
-- too: 20-120 ms a call at 10,000 agents, and binds and Subscribe streams
-- queued behind it. The same rows as the compass_participation view.
CREATE OR REPLACE FUNCTION compass_participation_of(account uuid)
RETURNS TABLE (channel_id uuid, since timestamptz)
LANGUAGE sql STABLE
SET enable_seqscan = off
SET enable_hashjoin = off
SET enable_mergejoin = off
AS $$
  SELECT cm.channel_id, min(greatest(cm.joined_at, above.attached_at))
  FROM accounts a
  CROSS JOIN LATERAL unnest(a.chain) WITH ORDINALITY AS c (member_id, n)
  CROSS JOIN LATERAL (
    SELECT max(b.attached_at) AS attached_at
    FROM unnest(a.chain[1:c.n - 1]) AS u (id)
    JOIN accounts b ON b.id = u.id
  ) above
  JOIN channel_members cm ON cm.account_id = c.member_id
  WHERE a.id = account
  GROUP BY cm.channel_id
$$;
REVOKE ALL ON FUNCTION compass_participation_of(account uuid) FROM PUBLIC, compass_app, compass_maintenance, compass_writer;
GRANT EXECUTE ON FUNCTION compass_participation_of(account uuid) TO PUBLIC;
