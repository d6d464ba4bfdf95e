-- after: 0016

-- The bounds of a tree: an agent has at most this many agents above it, and
-- a tree (a root agent and every agent below it) holds at most this many.
CREATE OR REPLACE FUNCTION compass_max_agent_depth() RETURNS integer
LANGUAGE sql IMMUTABLE AS 'SELECT 8';
REVOKE ALL ON FUNCTION compass_max_agent_depth() FROM PUBLIC, compass_app, compass_maintenance, compass_writer;
GRANT EXECUTE ON FUNCTION compass_max_agent_depth() TO PUBLIC;
