-- after: 0018

-- Whether the transaction's credential vouches for the account `named`.
CREATE OR REPLACE FUNCTION compass_vouched(named uuid) RETURNS boolean
LANGUAGE sql STABLE AS $$
  SELECT named IS NOT NULL AND compass_actor() IS NOT DISTINCT FROM named
$$;
REVOKE ALL ON FUNCTION compass_vouched(named uuid) FROM PUBLIC, compass_app, compass_maintenance, compass_writer;
GRANT EXECUTE ON FUNCTION compass_vouched(named uuid) TO PUBLIC;
