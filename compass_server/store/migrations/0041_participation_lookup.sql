-- What an account takes part in, looked up through the members' index
-- whatever the planner's statistics say. Read at every bind and every
-- Subscribe: with statistics taken while channel_members was small (a
-- workspace that grew by thousands of accounts within the minute before
-- autovacuum's next analyze), the view's plan read the whole table for each
-- call, 50-120 ms apiece at 10,000 members, and binds and Subscribe streams
-- queued behind it. The same rows as the compass_participation view.
CREATE FUNCTION compass_participation_of(account uuid)
RETURNS TABLE (channel_id uuid, since timestamptz)
LANGUAGE sql STABLE
SET enable_seqscan = off
SET enable_hashjoin = off
SET enable_mergejoin = off
AS $$
  SELECT p.channel_id, min(p.since) FROM compass_participation p
  WHERE p.account_id = account
  GROUP BY p.channel_id
$$;
