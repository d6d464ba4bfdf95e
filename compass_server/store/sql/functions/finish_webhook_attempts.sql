-- after: 0015

-- Records how attempts went, each if it is still its delivery's latest: the
-- attempt's row, and the delivery delivered, due again after retry_in, or
-- failed (retry_in NULL). `disable` (a 410 Gone) turns its endpoint off.
-- Returns how many were recorded.
CREATE OR REPLACE FUNCTION compass_finish_webhook_attempts(
  deliveries uuid[], attempts integer[], delivered boolean[], retry_in interval[],
  codes integer[], took_ms double precision[], why text[], said text[], disable text[]
) RETURNS integer
LANGUAGE plpgsql SECURITY DEFINER SET search_path = public AS $$
DECLARE
  d webhook_deliveries%ROWTYPE;
  recorded integer := 0;
BEGIN
  FOR i IN 1 .. coalesce(array_length(deliveries, 1), 0) LOOP
    UPDATE webhook_deliveries SET
      state = CASE WHEN delivered[i] THEN 'delivered' WHEN retry_in[i] IS NULL THEN 'failed'
                   ELSE 'pending' END,
      failures = failures + CASE WHEN delivered[i] THEN 0 ELSE 1 END,
      next_attempt_at = coalesce(now() + retry_in[i], next_attempt_at),
      finished_at = CASE WHEN delivered[i] OR retry_in[i] IS NULL THEN now() END
    WHERE id = deliveries[i] AND webhook_deliveries.attempts = $2[i] AND state = 'pending'
    RETURNING * INTO d;
    CONTINUE WHEN NOT FOUND;
    recorded := recorded + 1;
    UPDATE webhook_attempts a SET finished_at = now(), status_code = codes[i],
      latency_ms = took_ms[i], error = why[i], response = said[i]
    WHERE a.delivery_id = deliveries[i] AND a.n = $2[i];
    IF disable[i] IS NOT NULL THEN
      UPDATE webhook_endpoints SET enabled = false, disabled_reason = disable[i],
        disabled_at = now()
      WHERE id = d.endpoint_id AND enabled;
    END IF;
  END LOOP;
  RETURN recorded;
END
$$;
REVOKE ALL ON FUNCTION compass_finish_webhook_attempts(deliveries uuid[], attempts integer[], delivered boolean[], retry_in interval[], codes integer[], took_ms double precision[], why text[], said text[], disable text[]) FROM PUBLIC, compass_app, compass_maintenance, compass_writer;
GRANT EXECUTE ON FUNCTION compass_finish_webhook_attempts(deliveries uuid[], attempts integer[], delivered boolean[], retry_in interval[], codes integer[], took_ms double precision[], why text[], said text[], disable text[]) TO compass_maintenance;
