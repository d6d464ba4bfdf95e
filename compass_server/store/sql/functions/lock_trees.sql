-- after: 0016

-- One change to an owner's trees at a time (every agent of a tree has the
-- tree's owner), so two moves can't make a cycle between them.
CREATE OR REPLACE FUNCTION compass_lock_trees(owner uuid) RETURNS void
LANGUAGE sql AS $$
  SELECT pg_advisory_xact_lock(hashtextextended('compass.trees:' || owner::text, 0))
$$;
REVOKE ALL ON FUNCTION compass_lock_trees(owner uuid) FROM PUBLIC, compass_app, compass_maintenance, compass_writer;
GRANT EXECUTE ON FUNCTION compass_lock_trees(owner uuid) TO PUBLIC;
