-- The keys' index is searched by every lane that catches up, many at once
-- after a restart. With GIN's fast update, new entries wait in a pending
-- list that every search reads whole until a vacuum merges it: at 10,000
-- agents ~300 pages, 3 ms for each key looked up. Entries now go straight
-- into the index (a little more work per event written).
ALTER INDEX events_keys SET (fastupdate = off);
SELECT gin_clean_pending_list('events_keys'::regclass);
