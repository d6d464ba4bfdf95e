-- Each event is written once, numbered as its transaction commits.
--
-- Until now a write numbered its events itself only when the workspace's
-- counter was free; otherwise it inserted them unnumbered and a numbering
-- transaction after its commit rewrote each row with its id: a second write
-- of the whole payload, its index entries and WAL (38 % of events at 16
-- writers), and a numbering transaction that mostly waited for the counter.
--
-- Now a write stages its events in the transaction (compass_append_events_to)
-- and a deferred trigger appends them as it commits: it takes each staged
-- workspace's counter, inserts the events numbered, and notifies. Taking the
-- counter is the last thing a transaction does, so the counter is held only
-- for the commit's tail and its holder waits on nothing else: writes whose
-- commits meet queue for that long, never for a whole transaction, and two
-- can't deadlock over it (workspaces are taken in one order). Order stays
-- causal as before: a write that waited on another's lock commits after it.
-- Readers still read `id > cursor`: ids are handed out and committed under
-- the counter.
--
-- The staged events live in the transaction's own settings (compass.staged_N,
-- chunks of one JSON document per append), so they touch no table before
-- their one insert, vanish with a rolled-back savepoint, and a transaction of
-- thousands of appends copies at most a chunk per append. A row per staged
-- workspace in event_flushes fires the trigger at commit, and the trigger
-- appends only to the workspaces of this transaction's rows: their row-level
-- security holds a caller to its own workspace, as the insert into events
-- did, however it wrote the settings.

CREATE UNLOGGED TABLE event_flushes (
  -- The transaction's own rows are found by it, not among every dead row
  -- of a busy workspace.
  xact xid8 NOT NULL DEFAULT pg_current_xact_id(),
  workspace_id uuid NOT NULL
);
ALTER TABLE event_flushes ENABLE ROW LEVEL SECURITY;

CREATE INDEX event_flushes_xact ON event_flushes (xact, workspace_id);
GRANT INSERT ON event_flushes TO compass_app, compass_maintenance, compass_writer;

-- What writes of the release before left unnumbered. Its servers still call
-- compass_number_events and compass_sequence_leftovers, which find nothing.
SELECT compass_sequence_leftovers();
