-- after: 0025

CREATE OR REPLACE FUNCTION compass_ask_json(ask text) RETURNS jsonb
LANGUAGE plpgsql STABLE AS $$
BEGIN
  RETURN (
    SELECT b -> 'ask'
    FROM asks a
    JOIN messages m ON m.id = a.message_id,
    jsonb_array_elements(m.blocks) AS b
    WHERE a.ask_id = ask AND b ->> 'kind' = 'ask' AND b -> 'ask' ->> 'ask_id' = ask
    LIMIT 1);
END
$$;
REVOKE ALL ON FUNCTION compass_ask_json(ask text) FROM PUBLIC, compass_app, compass_maintenance, compass_writer;
GRANT EXECUTE ON FUNCTION compass_ask_json(ask text) TO PUBLIC;
