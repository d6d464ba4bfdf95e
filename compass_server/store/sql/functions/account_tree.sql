-- after: 0016

-- Refusals carry their own SQLSTATE (class CT) for the store to name:
-- CT001 a cycle, CT002 too deep, CT003 a full tree, CT004 not an agent of the
-- same owner, CT005 a chain written by hand, CT006 open asks would be left
-- behind.
CREATE OR REPLACE FUNCTION compass_account_tree() RETURNS trigger
LANGUAGE plpgsql AS $$
DECLARE
  parent accounts%ROWTYPE;
  height integer;
  moving integer;
  staying integer;
BEGIN
  IF TG_OP = 'UPDATE' AND NEW.owner_id IS DISTINCT FROM OLD.owner_id
     AND (NEW.parent_id IS NOT NULL OR EXISTS (SELECT 1 FROM accounts WHERE parent_id = NEW.id)) THEN
    RAISE EXCEPTION 'an agent in a tree keeps its owner' USING ERRCODE = 'CT004';
  END IF;
  IF TG_OP = 'UPDATE' AND NEW.parent_id IS NOT DISTINCT FROM OLD.parent_id THEN
    RETURN NEW;
  END IF;
  IF NEW.parent_id IS NULL THEN
    NEW.chain := ARRAY[NEW.id];
    NEW.attached_at := NULL;
    RETURN NEW;
  END IF;
  PERFORM compass_lock_trees(NEW.owner_id);
  -- Read after the lock: a move that committed meanwhile is seen.
  SELECT * INTO parent FROM accounts WHERE id = NEW.parent_id;
  IF NOT FOUND THEN
    RAISE EXCEPTION 'no agent %', NEW.parent_id USING ERRCODE = 'foreign_key_violation';
  END IF;
  IF NEW.kind <> 'agent' OR parent.kind <> 'agent' OR parent.owner_id IS DISTINCT FROM NEW.owner_id
  THEN
    RAISE EXCEPTION 'a parent is an agent of the same owner' USING ERRCODE = 'CT004';
  END IF;
  IF NEW.id = ANY (parent.chain) THEN
    RAISE EXCEPTION 'agent % is above its new parent', NEW.id USING ERRCODE = 'CT001';
  END IF;
  SELECT max(s.depth), count(*) INTO height, moving FROM compass_subtree(NEW.id) s;
  IF cardinality(parent.chain) + height > compass_max_agent_depth() THEN
    RAISE EXCEPTION 'the tree would be deeper than % agents below its root',
      compass_max_agent_depth() USING ERRCODE = 'CT002';
  END IF;
  SELECT count(*) INTO staying FROM compass_subtree(parent.chain[cardinality(parent.chain)]) s
    WHERE s.id NOT IN (SELECT m.id FROM compass_subtree(NEW.id) m);
  IF staying + moving > compass_max_tree_agents() THEN
    RAISE EXCEPTION 'the tree would hold more than % agents', compass_max_tree_agents()
      USING ERRCODE = 'CT003';
  END IF;
  NEW.chain := NEW.id || parent.chain;
  NEW.attached_at := now();
  RETURN NEW;
END
$$;
REVOKE ALL ON FUNCTION compass_account_tree() FROM PUBLIC, compass_app, compass_maintenance, compass_writer;
GRANT EXECUTE ON FUNCTION compass_account_tree() TO PUBLIC;
