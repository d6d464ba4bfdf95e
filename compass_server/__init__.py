"""Compass server: channels, asks, the relay for agent runners and the inbox."""
