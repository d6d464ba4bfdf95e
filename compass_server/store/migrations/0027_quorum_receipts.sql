-- Quorum asks and standing answers (0025) in the chained record and in
-- posting once (0026).
--
-- 1. An entry's hash commits to the standing answer that made the change,
-- when one did: who answered is the entry's actor and, for a rule's answer
-- or vote, the rule. An entry no rule made hashes as before, so every
-- chain written so far still holds; an ask whose chain holds and that has
-- an entry a rule made is chained again here, as 0026 chained the entries
-- before it.
--
-- 2. Every entry that ends an ask drops its print: any kind but a post or a
-- vote, as ask_history_one_ending (0025) says, so a new kind of ending
-- needs no change here. And an ask that ended in its post's transaction (a
-- standing answer answered it) never keeps one: compass_posts_once records
-- the print after the post, when its ending entry is already written.

-- --- the chain --------------------------------------------------------------

-- The asks to chain again: those with an entry a rule made, whose every
-- entry holds by 0026's hash.
CREATE TEMPORARY TABLE compass_rechained ON COMMIT DROP AS
  SELECT c.ask_id FROM (
    SELECT h.ask_id, h.standing_answer_id,
           h.entry_hash IS NOT DISTINCT FROM
             compass_history_hash(lag(h.entry_hash) OVER w, h) AS holds
    FROM ask_history h
    WHERE h.ask_id IN (SELECT ask_id FROM ask_history WHERE standing_answer_id IS NOT NULL)
    WINDOW w AS (PARTITION BY h.ask_id ORDER BY h.id)
  ) c
  GROUP BY c.ask_id
  HAVING bool_and(c.holds);

DO $$
DECLARE
  r ask_history%ROWTYPE;
  prev bytea;
  last_ask text;
BEGIN
  FOR r IN
    SELECT * FROM ask_history WHERE ask_id IN (SELECT ask_id FROM compass_rechained)
    ORDER BY ask_id, id
  LOOP
    IF r.ask_id IS DISTINCT FROM last_ask THEN
      prev := NULL;
      last_ask := r.ask_id;
    END IF;
    r.entry_hash := compass_history_hash(prev, r);
    UPDATE ask_history SET entry_hash = r.entry_hash WHERE id = r.id;
    prev := r.entry_hash;
  END LOOP;
END
$$;

-- --- prints of open asks only -----------------------------------------------

DELETE FROM ask_prints p
  WHERE EXISTS (SELECT 1 FROM ask_history h
                WHERE h.ask_id = p.ask_id AND compass_history_ends(h.kind));
