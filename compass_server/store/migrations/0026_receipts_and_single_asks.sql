-- A tamper-evident record, and no double-asking.
--
-- 1. An ask's history is hash-chained. Every entry, as it is inserted (by
-- whichever function writes it, under the ask message's row lock), commits
-- to the entry before it of the same ask and to the ask as it stands after
-- the change: entry_hash = sha256(the previous entry's hash || its own
-- fields and state_digest), state_digest = sha256 of the ask's stored JSON.
-- `compass-server admin verify-history` recomputes every hash of a
-- workspace with the same function and names the first entry that doesn't
-- hold. Entries written before this migration are chained here, the last of
-- each ask committing to the ask as it stands now.
--
-- 2. A post may carry a client key: the author's key for one logical post,
-- kept with the message it posted (post_keys), so the same key again
-- returns that message. A post of one ask carries its print, a digest of
-- what people see of it (its text, questions, options, multiplicity and
-- named answerers); an open ask's print is kept (ask_prints) until it ends,
-- so an identical post by the same author in the same channel returns the
-- open ask. compass_posts_once does both around compass_post_messages,
-- under the author's row lock, so two retries racing post once.

-- --- the chain --------------------------------------------------------------

ALTER TABLE ask_history ADD COLUMN state_digest bytea, ADD COLUMN entry_hash bytea;

DO $$
DECLARE
  r ask_history%ROWTYPE;
  prev bytea;
  last_ask text;
BEGIN
  FOR r IN SELECT * FROM ask_history ORDER BY ask_id, id LOOP
    IF r.ask_id IS DISTINCT FROM last_ask THEN
      prev := NULL;
      last_ask := r.ask_id;
    END IF;
    IF NOT EXISTS (SELECT 1 FROM ask_history l WHERE l.ask_id = r.ask_id AND l.id > r.id) THEN
      r.state_digest := sha256(convert_to(compass_ask_json(r.ask_id)::text, 'UTF8'));
    END IF;
    r.entry_hash := compass_history_hash(prev, r);
    UPDATE ask_history SET state_digest = r.state_digest, entry_hash = r.entry_hash
      WHERE id = r.id;
    prev := r.entry_hash;
  END LOOP;
END
$$;

-- --- one ask, once ----------------------------------------------------------

CREATE TABLE post_keys (
  author_id uuid NOT NULL REFERENCES accounts (id),
  client_key text NOT NULL,
  workspace_id uuid NOT NULL REFERENCES workspaces (id),
  message_id uuid NOT NULL REFERENCES messages (id),
  -- What the keyed post said: the same key with another post is refused.
  digest bytea NOT NULL,
  created_at timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (author_id, client_key)
);

-- The prints of open asks; an ask's goes when it ends.
CREATE TABLE ask_prints (
  ask_id text PRIMARY KEY REFERENCES asks (ask_id),
  workspace_id uuid NOT NULL REFERENCES workspaces (id),
  author_id uuid NOT NULL,
  channel_id uuid NOT NULL,
  print bytea NOT NULL
);
CREATE INDEX ask_prints_found ON ask_prints (author_id, channel_id, print);

DO $$
DECLARE
  t text;
BEGIN
  FOREACH t IN ARRAY ARRAY['post_keys', 'ask_prints'] LOOP
    EXECUTE format('ALTER TABLE %I ENABLE ROW LEVEL SECURITY', t);
  END LOOP;
END
$$;
GRANT SELECT, INSERT ON post_keys, ask_prints TO compass_writer;
GRANT SELECT ON post_keys, ask_prints TO compass_maintenance;
