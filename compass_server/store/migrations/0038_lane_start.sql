-- An agent's delivery lane starts where the agent came to be: its cursor is
-- written with the account, at the end of the workspace's log then, so a
-- first bind reads nothing from before the agent (none of it can be the
-- agent's to hear). An operator creates accounts as compass_maintenance.
GRANT SELECT, INSERT ON delivery_cursors TO compass_maintenance;
