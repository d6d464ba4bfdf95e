-- after: 0031

-- The ask's next step and when it is due, from its policy and its steps so
-- far: a reminder `remind_after` after the post or the last reminder, while
-- fewer than remind_times were sent; the escalation `escalate_after` after the
-- post, once. The escalation goes first when both are due. Nothing at or
-- after the deadline.
CREATE OR REPLACE FUNCTION compass_follow_up_next(
  stored jsonb, created timestamptz, OUT kind text, OUT due timestamptz
)
LANGUAGE plpgsql IMMUTABLE AS $$
DECLARE
  f jsonb := stored -> 'follow_up';
  steps jsonb := coalesce(stored -> 'follow_up_steps', '[]');
  reminded int;
  last_reminder timestamptz;
  remind_at timestamptz;
  escalate_at timestamptz;
BEGIN
  IF f IS NULL OR compass_ask_standing(stored) <> 'open' THEN
    RETURN;
  END IF;
  SELECT count(*), max((s ->> 'at')::timestamptz) INTO reminded, last_reminder
    FROM jsonb_array_elements(steps) s WHERE s ->> 'kind' = 'reminded';
  IF f ? 'remind_after_s' AND reminded < (f ->> 'remind_times')::int THEN
    remind_at := coalesce(last_reminder, created)
      + make_interval(secs => (f ->> 'remind_after_s')::float8);
  END IF;
  IF f ? 'escalate_after_s'
     AND NOT EXISTS (SELECT 1 FROM jsonb_array_elements(steps) s
                     WHERE s ->> 'kind' = 'escalated') THEN
    escalate_at := created + make_interval(secs => (f ->> 'escalate_after_s')::float8);
  END IF;
  IF escalate_at IS NOT NULL AND (remind_at IS NULL OR escalate_at <= remind_at) THEN
    kind := 'escalated';
    due := escalate_at;
  ELSIF remind_at IS NOT NULL THEN
    kind := 'reminded';
    due := remind_at;
  END IF;
  IF stored ? 'deadline' AND due >= (stored ->> 'deadline')::timestamptz THEN
    kind := NULL;
    due := NULL;
  END IF;
END
$$;
REVOKE ALL ON FUNCTION compass_follow_up_next(stored jsonb, created timestamp with time zone, OUT kind text, OUT due timestamp with time zone) FROM PUBLIC, compass_app, compass_maintenance, compass_writer;
GRANT EXECUTE ON FUNCTION compass_follow_up_next(stored jsonb, created timestamp with time zone, OUT kind text, OUT due timestamp with time zone) TO PUBLIC;
