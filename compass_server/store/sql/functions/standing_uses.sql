-- after: 0023

-- How many asks each of these standing answers answered (or voted in).
-- Counted as the owner: a person's or an admin's listing counts asks in
-- channels they may not read.
CREATE OR REPLACE FUNCTION compass_standing_uses(ids uuid[])
RETURNS TABLE (standing_answer_id uuid, uses bigint)
LANGUAGE sql STABLE SECURITY DEFINER SET search_path = public AS $$
  SELECT h.standing_answer_id, count(*) FROM ask_history h
  WHERE h.standing_answer_id = ANY (ids)
  GROUP BY h.standing_answer_id
$$;
REVOKE ALL ON FUNCTION compass_standing_uses(ids uuid[]) FROM PUBLIC, compass_app, compass_maintenance, compass_writer;
GRANT EXECUTE ON FUNCTION compass_standing_uses(ids uuid[]) TO compass_app, compass_maintenance;
