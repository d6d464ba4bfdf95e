-- after: 0025

CREATE OR REPLACE FUNCTION compass_history_hash(prev bytea, h ask_history) RETURNS bytea
LANGUAGE sql STABLE AS $$
  SELECT sha256(coalesce(prev, ''::bytea) || convert_to((jsonb_build_array(
    h.id, h.workspace_id, h.ask_id, h.kind, h.actor_id, h.surface, h.reason,
    to_char(h.at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"'),
    encode(h.state_digest, 'hex'))
    || CASE WHEN h.standing_answer_id IS NULL THEN '[]'::jsonb
            ELSE jsonb_build_array(h.standing_answer_id) END)::text, 'UTF8'))
$$;
REVOKE ALL ON FUNCTION compass_history_hash(prev bytea, h ask_history) FROM PUBLIC, compass_app, compass_maintenance, compass_writer;
GRANT EXECUTE ON FUNCTION compass_history_hash(prev bytea, h ask_history) TO PUBLIC;
