"""What the commands take: settings as flags, durations, ids and counts."""

from __future__ import annotations

import argparse
import datetime
import re
import uuid
from typing import Any

from compass_server import config


def config_flag(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--config",
        metavar="FILE",
        help=f"the TOML configuration file (default: ${config.CONFIG_ENV}, else none)",
    )


# What an admin command reads: where the database is, and the webhook key and
# networks that sealing secrets and checking URLs need.
ADMIN_SETTINGS = [
    "database_url",
    "data_dir",
    "log_level",
    "webhook_key",
    "webhook_key_file",
    "webhook_allowed_networks",
    "receipt_keys_dir",
]


def setting_flags(p: argparse.ArgumentParser, names: list[str] | None = None) -> None:
    """A flag per setting, taken as text and checked with the file's and the
    environment's values, so a bad one fails the same way."""
    config_flag(p)
    groups: dict[str, Any] = {}
    for s in config.SETTINGS:
        if names is not None and s.name not in names:
            continue
        group = groups.get(s.section)
        if group is None:
            title = f"[{s.section}] settings" if s.section else "settings"
            group = groups[s.section] = p.add_argument_group(title)
        default = config.default_text(s)
        help = f"{s.help} (${s.env}; {s.key} in the file; default {default})"
        if isinstance(s.kind, config.Switch):
            group.add_argument(
                s.flag, dest=s.name, action=argparse.BooleanOptionalAction, help=help
            )
        else:
            group.add_argument(s.flag, dest=s.name, metavar=s.kind.metavar, help=help)
    if names is None:
        # Still taken, so a start script that gives one keeps working: ignored, with a warning.
        retired = p.add_argument_group("settings there are no more (ignored, with a warning)")
        for r in config.RETIRED:
            retired.add_argument(
                r.flag, dest=r.name, metavar="N", help=f"no longer a setting: {r.why}"
            )


def loaded(args: argparse.Namespace) -> config.Loaded:
    names = [s.name for s in config.SETTINGS] + [r.name for r in config.RETIRED]
    flags = {name: getattr(args, name, None) for name in names}
    return config.load(path=args.config, flags=flags)


_DURATION = re.compile(r"^(\d+)([smhd]?)$")


_UNIT = {"": 1, "s": 1, "m": 60, "h": 3600, "d": 86400}


def duration(text: str) -> datetime.timedelta:
    m = _DURATION.match(text.strip())
    if m is None:
        raise argparse.ArgumentTypeError(f"{text!r} is not a duration like 3600, 90m, 12h or 30d")
    return datetime.timedelta(seconds=int(m.group(1)) * _UNIT[m.group(2)])


def an_id(text: str) -> uuid.UUID:
    try:
        return uuid.UUID(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not an id (a UUID)") from None


def count(text: str) -> int:
    if not text.strip().isdigit():
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number")
    return int(text)


def token_flags(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--label",
        default="",
        metavar="TEXT",
        help="a label for the token, e.g. where it is used",
    )
    p.add_argument(
        "--expires-in",
        type=duration,
        metavar="DURATION",
        help="the token's lifetime (default: never expires)",
    )


_LISTEN = "--http-listen [HOST:]PORT or --grpc-listen [HOST:]PORT"
_DATABASE = "--database-url URL"
# What a person typing one of these wants, rather than the nearest spelling
# (--port is nearest to --smtp-port).
HINTS = {
    "--port": _LISTEN,
    "--host": _LISTEN,
    "--bind": _LISTEN,
    "--listen": _LISTEN,
    "--address": _LISTEN,
    "--addr": _LISTEN,
    "--db": _DATABASE,
    "--database": _DATABASE,
    "--dsn": _DATABASE,
    "--postgres": _DATABASE,
    "--conf": "--config FILE",
    "--config-file": "--config FILE",
    "--verbose": "--log-level DEBUG",
    "--debug": "--log-level DEBUG",
}
