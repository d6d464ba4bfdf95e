"""The Slack app's defaults (config.py makes them settings)."""

from __future__ import annotations

SLACK_API_URL = "https://slack.com/api/"
# The link that connects a Slack user to an account.
SLACK_LINK_SECONDS = 900.0
# A person's one-time code, shown on the page and typed in Slack.
SLACK_CODE_SECONDS = 600.0
# Slack's interaction payloads are well under this; a modal's state is the largest.
SLACK_REQUEST_BYTES = 256 * 1024
