"""`compass-server`: the operator's entry points.

    compass-server serve [--config FILE] [--grpc-listen [H:]P] [--http-listen [H:]P]
                         [--database-url URL] [--data-dir D] [--workers N|auto]
                         [--SETTING VALUE ...]
    compass-server config check [--config FILE] [--SETTING VALUE ...]
    compass-server admin create-workspace NAME
    compass-server admin create-account --workspace ID --handle H --kind human|agent [--owner ID]
                                        [--parent AGENT_ID] [--role member|admin] [--label L]
                                        [--expires-in D]
    compass-server admin create-runner --workspace ID --name N [--label L] [--expires-in D]
    compass-server admin assign-agent --runner ID --agent ID
    compass-server admin unassign-agent --runner ID --agent ID
    compass-server admin reparent-agent --agent ID [--parent AGENT_ID]
    compass-server admin set-role --account ID --role member|admin
    compass-server admin list-accounts --workspace ID
    compass-server admin list-runners --workspace ID
    compass-server admin list-tokens (--workspace ID | --account ID | --runner ID) [--all]
    compass-server admin create-token (--account ID | --runner ID) [--label L] [--expires-in D]
    compass-server admin create-hook-token --agent ID --channel ID [--policy FILE] [--label L]
        [--expires-in D]
    compass-server admin revoke-token TOKEN_ID
    compass-server admin rotate-token TOKEN_ID [--grace D] [--expires-in D]
    compass-server admin create-webhook --workspace ID --url URL [--kind standard|slack]
                                        [--events TYPE,TYPE…]
    compass-server admin list-webhooks --workspace ID
    compass-server admin disable-webhook WEBHOOK_ID
    compass-server admin enable-webhook WEBHOOK_ID
    compass-server admin delete-webhook WEBHOOK_ID
    compass-server admin rotate-webhook-secret WEBHOOK_ID [--grace D]
    compass-server admin list-deliveries --webhook ID [--state pending|delivered|failed]
                                         [--limit N] [--page-token T]
    compass-server admin list-attempts DELIVERY_ID
    compass-server admin redeliver DELIVERY_ID
    compass-server admin connect-slack-app --workspace ID --team TEAM_ID [--bot-token-file F]
                                           [--signing-secret-file F] [--email-match]
    compass-server admin list-slack-apps --workspace ID
    compass-server admin disconnect-slack-app APP_ID
    compass-server admin map-slack-channel --app ID --channel ID --slack-channel SLACK_ID
    compass-server admin unmap-slack-channel --app ID --channel ID
    compass-server admin new-receipt-key [--signs-from TIME]
    compass-server admin verify-history --workspace ID

Durations D are seconds, or a number with s, m, h or d (90d, 12h). A
switch takes --x or --no-x. A usage error is one line on stderr and exit
status 2.

Every setting is read from the TOML file named by --config (or
COMPASS_CONFIG), then from COMPASS_<SETTING>, then from --<setting>, each
overriding the one before; `config check` prints the result. A COMPASS_*
variable nothing reads is a warning at start, naming the nearest known one.

Without --database-url (or COMPASS_DATABASE_URL) every command uses an
embedded PostgreSQL kept under the data dir (default ./.compass); serve
creates it on first start, admin commands only use one that exists. A failure
to start is one line on stderr and exit status 2 for serve, one JSON error
object and exit status 1 for admin.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from collections.abc import Callable
from types import ModuleType
from typing import Any

from compass_agentkit.command import Parser, version
from compass_server import config, environment, workers
from compass_server.cli import (
    admin,
    arguments,
    follow_ups,
    output,
    people,
    receipts,
    serve,
    slack,
    tokens,
    webhooks,
    workspaces,
)
from compass_server.startup import StartupError
from compass_server.store import StoreError
from compass_server.telemetry import logs

__all__ = ["main"]

# The admin commands, a file each, in the order `admin --help` lists them.
GROUPS: tuple[ModuleType, ...] = (
    workspaces,
    tokens,
    webhooks,
    people,
    follow_ups,
    slack,
    receipts,
)
ACTIONS: dict[str, str] = {name: s for group in GROUPS for name, s in group.ACTIONS.items()}
HANDLERS: dict[str, admin.Handler] = {n: h for g in GROUPS for n, h in g.HANDLERS.items()}
# Settings-only actions: they run without opening the database.
LOCAL: dict[str, Callable[[argparse.Namespace, config.Settings], dict[str, Any]]] = receipts.LOCAL


class _Parser(Parser):
    hints = arguments.HINTS


def parser() -> argparse.ArgumentParser:
    top = _Parser(prog="compass-server", description=__doc__.split("\n")[0])
    top.add_argument("--version", action="version", version=f"%(prog)s {version('compass-server')}")
    commands = top.add_subparsers(dest="command", required=True, metavar="COMMAND")
    serving = commands.add_parser(
        "serve", help="run the server", description="Run the server until SIGINT or SIGTERM."
    )
    arguments.setting_flags(serving)
    serving.add_argument(
        workers.WORKER_FLAG,
        type=int,
        metavar="N",
        help="set by `serve --workers` on each server process it starts: the parent's pid "
        "(not for operators)",
    )
    configure = commands.add_parser(
        "config",
        help="check a configuration",
        description="Check the configuration: the file, the environment and flags.",
    )
    config_commands = configure.add_subparsers(
        dest="config_command", required=True, metavar="ACTION"
    )
    config_check = config_commands.add_parser(
        "check",
        help="print the effective configuration, secrets masked",
        description="Validate the configuration and print the effective one as TOML, secrets "
        "masked, each value with where it came from. A bad value exits 2.",
    )
    arguments.setting_flags(config_check)
    width = max(map(len, ACTIONS))
    administer = commands.add_parser(
        "admin",
        help="administer workspaces: accounts, runners, assignments, roles and tokens",
        usage="%(prog)s [-h] ACTION ...",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        description="Administer workspaces in the server's database. Each\n"
        'prints one JSON object; a failure prints {"error": …} on stderr and exits 1.',
        epilog="actions:\n"
        + "\n".join(f"  {name:<{width}}  {summary}" for name, summary in ACTIONS.items()),
    )
    # Listed in the epilog, one line each: argparse wraps long names onto two.
    actions = administer.add_subparsers(
        dest="action", required=True, metavar="ACTION", help=argparse.SUPPRESS
    )

    def action(name: str) -> argparse.ArgumentParser:
        summary = ACTIONS[name]
        made = actions.add_parser(
            name,
            prog=f"{administer.prog} {name}",
            description=summary[0].upper() + summary[1:] + ".",
        )
        arguments.setting_flags(made, arguments.ADMIN_SETTINGS)
        return made

    for group in GROUPS:
        group.add_parsers(action)
    return top


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    args = parser().parse_args(argv)
    unknown = environment.unknown()
    try:
        loaded = arguments.loaded(args)
    except config.ConfigError as exc:
        for warning in unknown:
            print(f"compass-server: warning: {warning}", file=sys.stderr)
        if args.command == "admin":
            return output.error(exc.message)
        return output.said("compass-server", exc.message)
    settings = loaded.settings
    # An admin command's output is its one JSON object, config check's its
    # TOML; serve narrates.
    level = settings.log_level
    if args.command != "serve" and loaded.sources["log_level"] == "default":
        level = "WARNING"
    logs.configure(level, settings.log_format)
    for warning in [*unknown, *loaded.warnings]:
        serve.log.warning("%s", warning)
    if args.command == "config":
        print(config.effective_toml(loaded), end="")
        return 0
    if args.command == "serve":
        try:
            if settings.workers > 1 and args.worker_of is None:
                asyncio.run(workers.Supervisor(settings, argv).run())
            else:
                serve.run(serve.serve(loaded, args.worker_of), settings.event_loop)
        except StartupError as exc:
            return output.said("compass-server", exc.message)
        return 0
    try:
        local = LOCAL.get(args.action)
        if local is not None:
            found = local(args, settings)
        else:
            found = serve.run(admin.run(HANDLERS[args.action], args, settings), settings.event_loop)
    except (StoreError, StartupError) as exc:
        return output.error(exc.message)
    except OSError as exc:
        return output.error(f"{exc.filename}: {exc.strerror}")
    return output.result(found)
