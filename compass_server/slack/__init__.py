"""Slack as an answering surface: a connected app posts asks as interactive
messages, takes answers and declines from them, and updates each message in
place when its ask ends."""
