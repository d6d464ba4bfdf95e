ALTER TABLE events
  ADD COLUMN keys uuid[] GENERATED ALWAYS AS (compass_event_keys(kind, channel_id, payload)) STORED;
CREATE INDEX events_keys ON events USING gin (keys);
