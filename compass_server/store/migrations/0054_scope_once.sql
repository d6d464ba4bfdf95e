-- A transaction proves its scope once. compass_note_scope (sql/functions/)
-- finds the credential's workspace, and whether it vouches for the account
-- the transaction acts as, and keeps both here, one row per backend, stamped
-- with the transaction's start; row-level security then reads them with no
-- query of its own (compass_workspace, compass_actor). Only that function
-- writes here; a backend sees only its own row. Unlogged: a row means
-- nothing once its transaction is over.
CREATE UNLOGGED TABLE compass_scopes (
  pid int PRIMARY KEY,
  at timestamptz NOT NULL,
  workspace_id uuid,
  actor_id uuid
);
ALTER TABLE compass_scopes ENABLE ROW LEVEL SECURITY;
REVOKE ALL ON compass_scopes FROM compass_app, compass_maintenance, compass_writer;
GRANT SELECT ON compass_scopes TO compass_app, compass_maintenance, compass_writer;

-- A row's workspace is already held by a reference that carries it (the
-- channel a message is in, the message an ask is of, the ask a record is
-- of): the check against workspaces was a second query per row for nothing.
-- An event's workspace is one a writer proved (the marker rows its flush
-- reads are held to it), and events are written by the flush alone.
ALTER TABLE messages DROP CONSTRAINT messages_workspace_id_fkey;
ALTER TABLE asks DROP CONSTRAINT asks_workspace_id_fkey;
ALTER TABLE ask_history DROP CONSTRAINT ask_history_workspace_id_fkey;
ALTER TABLE events DROP CONSTRAINT events_workspace_id_fkey;
-- An ask's print is written with the workspace its writer proved, and goes
-- when the ask ends.
ALTER TABLE ask_prints DROP CONSTRAINT ask_prints_workspace_id_fkey;
