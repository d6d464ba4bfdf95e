-- Follow-ups: an ask may carry a policy (its block's `follow_up`, written at
-- post: remind_after_s, remind_times, escalate_after_s, escalate_to,
-- escalate_to_owner). Its next step's time is the ask's follow_up_at, set at
-- post and after each step, and claimed like a deadline (0009, 0021): under
-- the ask message's row lock, by whichever server sweeps first, announced on
-- compass_deadlines so every server's loop wakes for it.
--
-- A step is appended to the ask's server-owned `follow_up_steps` ({kind:
-- reminded|escalated, at, account_ids, urgent}) with the ask's
-- message_updated event, so readers, the page and the mail see it. A step
-- is taken only while the ask is open and before its deadline: a step that
-- finds the ask ended (an ending held the lock first) clears the due time
-- and takes nothing. The people an escalation adds may answer or decline
-- as a named answerer may.

ALTER TABLE asks ADD COLUMN follow_up_at timestamptz;
CREATE INDEX asks_follow_up_at ON asks (follow_up_at) WHERE follow_up_at IS NOT NULL;
