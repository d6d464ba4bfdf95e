-- after: 0016

CREATE OR REPLACE FUNCTION compass_max_tree_agents() RETURNS integer
LANGUAGE sql IMMUTABLE AS 'SELECT 100';
REVOKE ALL ON FUNCTION compass_max_tree_agents() FROM PUBLIC, compass_app, compass_maintenance, compass_writer;
GRANT EXECUTE ON FUNCTION compass_max_tree_agents() TO PUBLIC;
