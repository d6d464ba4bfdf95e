-- after: 0023

-- The rules that may answer a newly posted ask of `author` (whose chain is
-- `author_chain`) in `channel`, each with the ask's questions answered its
-- way: rules in force for the author, or for an agent above it that
-- include its sub-agents, of active people the ask lets answer (those it
-- names, else the channel's members), that answer every one of its
-- questions. A named person's come in the order the ask names them, newest
-- first; checked again under each rule's lock before one is used.
CREATE OR REPLACE FUNCTION compass_standing_candidates(
  stored jsonb, author uuid, author_chain uuid[], channel uuid
) RETURNS TABLE (rule_id uuid, person uuid, answered jsonb)
LANGUAGE sql VOLATILE AS $$
  SELECT s.id, s.account_id, a.answered
  FROM standing_answers s
  JOIN accounts p ON p.id = s.account_id AND p.kind = 'human' AND p.deactivated_at IS NULL
  CROSS JOIN LATERAL (
    SELECT jsonb_agg(x.q || found.answer ORDER BY x.i) AS answered,
           count(found.answer) AS matched, count(*) AS asked
    FROM jsonb_array_elements(stored -> 'questions') WITH ORDINALITY AS x (q, i)
    LEFT JOIN LATERAL (
      SELECT jsonb_strip_nulls(jsonb_build_object(
               'chosen_option_ids', e -> 'chosen_option_ids', 'custom_text', e -> 'custom_text'))
               AS answer
      FROM jsonb_array_elements(s.questions) AS e
      WHERE compass_question_key(e) = compass_question_key(x.q)
      LIMIT 1
    ) found ON true
  ) a
  LEFT JOIN LATERAL (
    SELECT y.n FROM jsonb_array_elements_text(stored -> 'answerer_ids') WITH ORDINALITY AS y (id, n)
    WHERE y.id = s.account_id::text
  ) named ON true
  WHERE s.agent_id = ANY (author_chain)
    AND (s.agent_id = author OR s.include_subagents)
    AND s.revoked_at IS NULL
    AND s.expires_at > clock_timestamp()
    AND a.matched = a.asked
    AND CASE WHEN stored ? 'answerer_ids' THEN named.n IS NOT NULL
             ELSE EXISTS (SELECT 1 FROM channel_members cm
                          WHERE cm.channel_id = channel AND cm.account_id = s.account_id) END
  ORDER BY named.n NULLS LAST, s.created_at DESC, s.id
$$;
REVOKE ALL ON FUNCTION compass_standing_candidates(stored jsonb, author uuid, author_chain uuid[], channel uuid) FROM PUBLIC, compass_app, compass_maintenance, compass_writer;
GRANT EXECUTE ON FUNCTION compass_standing_candidates(stored jsonb, author uuid, author_chain uuid[], channel uuid) TO PUBLIC;
