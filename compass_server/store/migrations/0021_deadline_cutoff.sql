-- A deadline is a cutoff, decided under the ask message's row lock.
--
-- 1. An answer, a decline or a withdraw that holds the row at or after the
-- ask's deadline ends the ask as expired instead, and tells its caller so
-- (status 'expired', with the ask's message and events as any ending): the
-- database's clock at the lock decides, whichever server handled the call
-- and whether or not a sweep ran. An expiry, written by the sweep or by such
-- a call, is timed at the deadline itself, as readers show it before it is
-- written.
--
-- 2. A new deadline is announced on compass_deadlines (its epoch seconds),
-- in the transaction that posts it, so every server's expiry loop wakes for
-- the nearest one, not only the posting server's.
--
-- 3. Nothing rewrites an ask's content, by construction: the tables refuse
-- it, whatever function, trigger, rule or statement composed anywhere tries.
-- A message changes after its post only in its asks' server-owned state
-- (answered, cancelled, ending; each question's chosen options, custom text
-- and timed_out), and an ask that ended stays as it ended. An inbox
-- message's content never changes (an inbox ask's standing lives in its own
-- columns). compass_app writes messages only through the write functions,
-- so it holds no INSERT, UPDATE or DELETE on the table.
--
-- 4. What a webhook endpoint is owed counts the events of the log its
-- cursor hasn't reached yet, not only the deliveries a courier made of
-- them: with no courier running anywhere, the backlog still shows.

-- 3. An ask's content holds.

REVOKE INSERT, UPDATE, DELETE ON messages FROM compass_app;

-- 4. What webhook endpoints are owed.
