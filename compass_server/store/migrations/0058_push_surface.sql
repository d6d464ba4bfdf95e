-- An answer tapped on a push notification's choice is recorded as `push`,
-- not as the page's. NOT VALID: every row already passed the narrower check,
-- and servers still running keep writing while no scan holds the table.
ALTER TABLE ask_history DROP CONSTRAINT ask_history_surface_check;
ALTER TABLE ask_history ADD CONSTRAINT ask_history_surface_check CHECK (surface IN (
  'grpc', 'connect', 'relay', 'web', 'inbox', 'server', 'standing_answer', 'slack', 'email',
  'push')) NOT VALID;
