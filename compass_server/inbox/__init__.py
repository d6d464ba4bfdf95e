"""The inbox's rules that are not SQL: bounds, item transitions, pictures."""
