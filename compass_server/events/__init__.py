"""The event hub: one LISTEN per process feeding every subscriber from the log."""
