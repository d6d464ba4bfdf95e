-- after: 0043
DROP TRIGGER IF EXISTS event_flushes_at_commit ON event_flushes;
CREATE CONSTRAINT TRIGGER event_flushes_at_commit AFTER INSERT ON event_flushes
  DEFERRABLE INITIALLY DEFERRED
  FOR EACH ROW EXECUTE FUNCTION compass_flush_events();
