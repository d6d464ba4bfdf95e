-- A sign-in under way lives in the browser that started it, in a cookie
-- signed with the deployment's sign-in key (any server may take the
-- callback), not in a table any client could fill. The key signs only
-- that: one who reads it can make an attempt cookie, which vouches for
-- nobody (the provider's ID token does). signin_attempts stays, unused by
-- this release, for the servers of the release before that may still run
-- beside it while a deployment upgrades; a later release drops it.

-- One row: made by the first server that needs it.
CREATE TABLE signin_key (
  one boolean PRIMARY KEY DEFAULT true CHECK (one),
  key bytea NOT NULL CHECK (octet_length(key) >= 32),
  created_at timestamptz NOT NULL DEFAULT now()
);
REVOKE ALL ON signin_key FROM compass_app;
GRANT SELECT, INSERT ON signin_key TO compass_maintenance;
