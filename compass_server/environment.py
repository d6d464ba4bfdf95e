"""The COMPASS_* environment variables anything in this repository reads, so
that the server warns at start about one it doesn't know, naming the nearest
known one (a misspelt setting is otherwise silently ignored)."""

from __future__ import annotations

import os
from collections.abc import Mapping

from compass_agentkit.command import ENVIRONMENT as KIT
from compass_agentkit.command import unknown_environment
from compass_server import config

# Read by dev.py, CI and the tests, not by the server.
DEVELOPMENT = frozenset(
    {
        "COMPASS_VENV",
        "COMPASS_BREAKING_AGAINST",
        "COMPASS_TEST_DATABASE_URL",
        "COMPASS_REQUIRE_BROWSER",
        "COMPASS_RACE_SEED",
    }
)

KNOWN = frozenset(
    {s.env for s in config.SETTINGS}
    | {r.env for r in config.RETIRED}
    | {config.CONFIG_ENV}
    | set(KIT)
    | DEVELOPMENT
)


def unknown(env: Mapping[str, str] | None = None) -> list[str]:
    """One warning per COMPASS_* variable nothing here reads."""
    return unknown_environment(os.environ if env is None else env, KNOWN)
