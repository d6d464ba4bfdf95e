-- The write functions' helpers keep their plans, and the writer scope runs one statement fewer.
--
-- A LANGUAGE sql function that can't be inlined (its body has a FROM) is
-- planned again on every call of every transaction: PL/pgSQL keeps the plan
-- for the session. pg_stat_statements and track_functions over the ask
-- lifecycle (bench/pg_profile.py) put compass_ask_json, called twice per
-- lifecycle by the history chain's trigger, at about ten times the cost of
-- the one statement it runs, and compass_voted, once per answer, at three
-- times. The same statements, the same results, planned once per connection.

CREATE OR REPLACE FUNCTION compass_ask_json(ask text) RETURNS jsonb
LANGUAGE plpgsql STABLE AS $$
BEGIN
  RETURN (
    SELECT b -> 'ask'
    FROM asks a
    JOIN messages m ON m.id = a.message_id,
    jsonb_array_elements(m.blocks) AS b
    WHERE a.ask_id = ask AND b ->> 'kind' = 'ask' AND b -> 'ask' ->> 'ask_id' = ask
    LIMIT 1);
END
$$;

CREATE OR REPLACE FUNCTION compass_voted(stored jsonb, actor uuid) RETURNS text
LANGUAGE plpgsql IMMUTABLE AS $$
BEGIN
  RETURN (
    SELECT v ->> 'kind' FROM jsonb_array_elements(coalesce(stored -> 'quorum_votes', '[]')) v
    WHERE v ->> 'account_id' = actor::text
    LIMIT 1);
END
$$;

-- One statement fewer per write, the same effects in the same order: the
-- scope names the credential and the actor in one statement before it proves
-- them. (Folding the event insert, the counter's update and the NOTIFY into
-- one statement with data-modifying CTEs was measured slower per call, and
-- is not done.)
CREATE OR REPLACE FUNCTION compass_writer_scope(cred bytea, actor uuid) RETURNS uuid
LANGUAGE plpgsql AS $$
BEGIN
  -- The workspace is the credential's (0029), never a setting.
  PERFORM set_config('compass.credential', encode(cred, 'hex'), true),
          set_config('compass.actor', coalesce(actor::text, ''), true);
  RETURN compass_credential_workspace();
END
$$;
