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
import datetime
import gc
import json
import logging
import pathlib
import re
import signal
import sys
import uuid
from collections.abc import Awaitable, Callable
from typing import Any

from google.protobuf import duration_pb2, json_format
from google.protobuf.message import Message

from compass.v1 import admin_pb2 as ad
from compass_agentkit.command import Parser, version
from compass_server import config, environment, follow_ups_cli, people_cli, workers
from compass_server.api.admin import AdminApi
from compass_server.receipts import cli as receipts_cli
from compass_server.slack import cli as slack_cli
from compass_server.startup import StartupError, open_database, webhook_reach, webhook_vault
from compass_server.store import Store, StoreError
from compass_server.store.blocks import DeadlineBounds
from compass_server.store.errors import InvalidArgument
from compass_server.store.slack import SlackStore
from compass_server.store.types import Operator, WebhookEventType
from compass_server.store.webhooks import WebhookStore
from compass_server.telemetry import logs

log = logging.getLogger("compass_server")


def _config_flag(p: argparse.ArgumentParser) -> None:
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


def _setting_flags(p: argparse.ArgumentParser, names: list[str] | None = None) -> None:
    """A flag per setting, taken as text and checked with the file's and the
    environment's values, so a bad one fails the same way."""
    _config_flag(p)
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


def _loaded(args: argparse.Namespace) -> config.Loaded:
    names = [s.name for s in config.SETTINGS] + [r.name for r in config.RETIRED]
    flags = {name: getattr(args, name, None) for name in names}
    return config.load(path=args.config, flags=flags)


_ACTIONS = {
    "create-workspace": "a new workspace; prints its id",
    "create-account": "a person or an agent of a workspace; prints its id and token",
    "create-runner": "a runner that hosts agents; prints its id and token",
    "assign-agent": "lets a runner bind an agent of its workspace",
    "unassign-agent": "takes an agent from a runner, unbinding its sessions",
    "reparent-agent": "puts an agent (and those below it) under another agent",
    "set-role": "makes a person an admin or a member",
    "list-accounts": "lists a workspace's accounts",
    "list-runners": "lists a workspace's runners and their agents",
    "list-tokens": "lists tokens (never their secrets), newest first",
    "create-token": "issues another token for an account or a runner",
    "create-hook-token": "issues a hook token: an agent's harness hooks ask in a channel with it",
    "revoke-token": "refuses a token from now on, on every server",
    "rotate-token": "replaces a token with a new secret; the old one ends",
    "create-webhook": "a webhook endpoint; prints its id and signing secret",
    "list-webhooks": "lists a workspace's webhooks (never their secrets)",
    "disable-webhook": "stops making deliveries for a webhook",
    "enable-webhook": "resumes a webhook, from the events of now on",
    "delete-webhook": "deletes a webhook with its deliveries",
    "rotate-webhook-secret": "a new signing secret; the old one signs during --grace",
    "list-deliveries": "lists a webhook's deliveries, newest first",
    "list-attempts": "a delivery, every attempt at it and its body",
    "redeliver": "sends a delivery again now, with the same webhook-id",
    **people_cli.ACTIONS,
    **follow_ups_cli.ACTIONS,
    **slack_cli.ACTIONS,
    **receipts_cli.ACTIONS,
}


def _parser() -> argparse.ArgumentParser:
    parser = Parser(prog="compass-server", description=__doc__.split("\n")[0])
    parser.add_argument(
        "--version", action="version", version=f"%(prog)s {version('compass-server')}"
    )
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    serve = commands.add_parser(
        "serve", help="run the server", description="Run the server until SIGINT or SIGTERM."
    )
    _setting_flags(serve)
    serve.add_argument(
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
    _setting_flags(config_check)
    width = max(map(len, _ACTIONS))
    admin = commands.add_parser(
        "admin",
        help="administer workspaces: accounts, runners, assignments, roles and tokens",
        usage="%(prog)s [-h] ACTION ...",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        description="Administer workspaces in the server's database. Each\n"
        'prints one JSON object; a failure prints {"error": …} on stderr and exits 1.',
        epilog="actions:\n"
        + "\n".join(f"  {name:<{width}}  {summary}" for name, summary in _ACTIONS.items()),
    )
    # Listed in the epilog, one line each: argparse wraps long names onto two.
    actions = admin.add_subparsers(
        dest="action", required=True, metavar="ACTION", help=argparse.SUPPRESS
    )

    def action(name: str) -> argparse.ArgumentParser:
        summary = _ACTIONS[name]
        return actions.add_parser(
            name, prog=f"{admin.prog} {name}", description=summary[0].upper() + summary[1:] + "."
        )

    def an_id(p: Any, flag: str, help: str, required: bool = True) -> None:
        p.add_argument(flag, required=required, type=_uuid, metavar="ID", help=help)

    ws = action("create-workspace")
    ws.add_argument("name", metavar="NAME", help="the workspace's name")
    acct = action("create-account")
    an_id(acct, "--workspace", "the workspace it belongs to")
    acct.add_argument(
        "--handle", required=True, metavar="HANDLE", help="its @handle, unique in the workspace"
    )
    acct.add_argument("--kind", required=True, choices=["human", "agent"], help="who it is")
    an_id(acct, "--owner", "the owning human (agents only)", required=False)
    an_id(
        acct,
        "--parent",
        "the agent above this one (agents only; its owner is the default --owner)",
        required=False,
    )
    acct.add_argument(
        "--role", choices=["member", "admin"], default="member", help="default member"
    )
    runner = action("create-runner")
    an_id(runner, "--workspace", "the workspace it belongs to")
    runner.add_argument("--name", required=True, metavar="NAME", help="the runner's name")
    for issuing in (acct, runner):
        _token_flags(issuing)
    assign = action("assign-agent")
    an_id(assign, "--runner", "the runner")
    an_id(assign, "--agent", "the agent it may bind")
    unassign = action("unassign-agent")
    an_id(unassign, "--runner", "the runner")
    an_id(unassign, "--agent", "the agent it no longer binds")
    move = action("reparent-agent")
    an_id(move, "--agent", "the agent to move")
    an_id(move, "--parent", "the agent to put it under (default: make it a root)", False)
    role = action("set-role")
    an_id(role, "--account", "the person")
    role.add_argument("--role", required=True, choices=["member", "admin"], help="their role")
    accounts = action("list-accounts")
    an_id(accounts, "--workspace", "the workspace")
    runners = action("list-runners")
    an_id(runners, "--workspace", "the workspace")
    tokens = action("list-tokens")
    whose = tokens.add_mutually_exclusive_group(required=True)
    an_id(whose, "--workspace", "every token of a workspace", False)
    an_id(whose, "--account", "an account's tokens", False)
    an_id(whose, "--runner", "a runner's tokens", False)
    tokens.add_argument("--all", action="store_true", help="also revoked and expired tokens")
    create = action("create-token")
    owner = create.add_mutually_exclusive_group(required=True)
    an_id(owner, "--account", "the account the token signs in as", False)
    an_id(owner, "--runner", "the runner the token signs in as", False)
    _token_flags(create)
    hook_token = action("create-hook-token")
    an_id(hook_token, "--agent", "the agent whose harness's hooks ask")
    an_id(hook_token, "--channel", "where its asks are posted")
    hook_token.add_argument(
        "--policy",
        type=pathlib.Path,
        metavar="FILE",
        help="the policy (TOML) of who answers what (default: anyone in the channel, each request)",
    )
    _token_flags(hook_token)
    revoke = action("revoke-token")
    revoke.add_argument("token_id", type=_uuid, metavar="TOKEN_ID", help="the token's id")
    rotate = action("rotate-token")
    rotate.add_argument("token_id", type=_uuid, metavar="TOKEN_ID", help="the token's id")
    rotate.add_argument(
        "--grace",
        type=_duration,
        metavar="DURATION",
        help="how long the old token keeps working (default: it is revoked at once)",
    )
    rotate.add_argument(
        "--expires-in",
        type=_duration,
        metavar="DURATION",
        help="the new token's lifetime (default: as long as the old one's)",
    )
    hook = action("create-webhook")
    an_id(hook, "--workspace", "the workspace whose events it takes")
    hook.add_argument("--url", required=True, metavar="URL", help="where deliveries are posted")
    hook.add_argument(
        "--kind",
        choices=["standard", "slack", "email", "push"],
        default="standard",
        help="default standard",
    )
    hook.add_argument(
        "--events",
        default="",
        metavar="TYPE,…",
        help="event types it takes, comma-separated (default: all): "
        + ", ".join(t.value for t in WebhookEventType),
    )
    hooks = action("list-webhooks")
    an_id(hooks, "--workspace", "the workspace")
    by_id = [action(name) for name in ("disable-webhook", "enable-webhook", "delete-webhook")]
    for sub in by_id:
        sub.add_argument("webhook_id", type=_uuid, metavar="WEBHOOK_ID", help="the webhook's id")
    rotate_secret = action("rotate-webhook-secret")
    rotate_secret.add_argument(
        "webhook_id", type=_uuid, metavar="WEBHOOK_ID", help="the webhook's id"
    )
    rotate_secret.add_argument(
        "--grace",
        type=_duration,
        metavar="DURATION",
        help="how long the old secret keeps signing beside the new one (default 1d; 0: none)",
    )
    deliveries = action("list-deliveries")
    an_id(deliveries, "--webhook", "the webhook")
    deliveries.add_argument(
        "--state", choices=["pending", "delivered", "failed"], help="only these (default: all)"
    )
    deliveries.add_argument(
        "--limit", type=_count, default=50, metavar="N", help="at most 200 (default 50)"
    )
    deliveries.add_argument(
        "--page-token",
        default="",
        metavar="TOKEN",
        help="the next_page_token of the page before",
    )
    attempts = action("list-attempts")
    attempts.add_argument(
        "delivery_id", type=_uuid, metavar="DELIVERY_ID", help="the delivery's id"
    )
    redeliver = action("redeliver")
    redeliver.add_argument(
        "delivery_id", type=_uuid, metavar="DELIVERY_ID", help="the delivery's id"
    )
    people = people_cli.add_parsers(action, _duration, _uuid)
    receipts = receipts_cli.add_parsers(action, _uuid)
    slack = slack_cli.add_parsers(action, _uuid)
    follow_ups = follow_ups_cli.add_parsers(action, _uuid)
    for sub in (
        *people,
        *follow_ups,
        *slack,
        *receipts,
        ws,
        acct,
        runner,
        assign,
        unassign,
        move,
        role,
        accounts,
        runners,
        tokens,
        create,
        revoke,
        rotate,
        hook_token,
        hook,
        hooks,
        *by_id,
        rotate_secret,
        deliveries,
        attempts,
        redeliver,
    ):
        _setting_flags(sub, ADMIN_SETTINGS)
    return parser


_DURATION = re.compile(r"^(\d+)([smhd]?)$")
_UNIT = {"": 1, "s": 1, "m": 60, "h": 3600, "d": 86400}


def _duration(text: str) -> datetime.timedelta:
    m = _DURATION.match(text.strip())
    if m is None:
        raise argparse.ArgumentTypeError(f"{text!r} is not a duration like 3600, 90m, 12h or 30d")
    return datetime.timedelta(seconds=int(m.group(1)) * _UNIT[m.group(2)])


def _uuid(text: str) -> uuid.UUID:
    try:
        return uuid.UUID(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not an id (a UUID)") from None


def _count(text: str) -> int:
    if not text.strip().isdigit():
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number")
    return int(text)


def _token_flags(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--label",
        default="",
        metavar="TEXT",
        help="a label for the token, e.g. where it is used",
    )
    p.add_argument(
        "--expires-in",
        type=_duration,
        metavar="DURATION",
        help="the token's lifetime (default: never expires)",
    )


async def _serve(loaded: config.Loaded, worker_of: int | None = None) -> None:
    if worker_of is not None:
        workers.die_with_parent(worker_of)
    # The server is loaded only to serve: admin commands start without it.
    from compass_server.app import CompassServer

    server = CompassServer(loaded.settings, reuse_port=worker_of is not None)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    loop.add_signal_handler(signal.SIGHUP, server.reload_tls)
    await server.start()
    # What start-up built lives as long as the process: keep it out of every
    # collection's scan.
    gc.freeze()
    ready: dict[str, Any] = {"grpc_port": server.grpc_port, "http_port": server.http_port}
    if server.relay_port:
        ready["relay_port"] = server.relay_port
    if server.metrics_port:
        ready["metrics_port"] = server.metrics_port
    print(json.dumps({**ready, "ready": True}), flush=True)
    await stop.wait()
    log.info("shutting down")
    await server.drain()
    await server.stop()
    log.info("stopped")


async def _admin(args: argparse.Namespace, settings: config.Settings) -> dict[str, Any]:
    # Never a new embedded database: ids minted there would be unknown to the server.
    db, embedded = await open_database(settings, create=False, min_size=1, max_size=2)
    try:
        store = Store(
            db,
            deadline_bounds=DeadlineBounds(
                datetime.timedelta(seconds=settings.ask_deadline_min_seconds),
                datetime.timedelta(seconds=settings.ask_deadline_max_seconds),
            ),
        )
        vault = webhook_vault(settings, embedded=embedded is not None)
        args.admin_api = AdminApi(
            store.admin,
            webhooks=WebhookStore(db, store.admin, vault),
            reach=webhook_reach(settings),
            people=store,
            slack=SlackStore(db, store.admin, vault),
        )
        args.public_url = settings.public_url
        args.link_max = datetime.timedelta(seconds=settings.signin_link_max_seconds)
        return await _ADMIN[args.action](store, args)
    finally:
        await db.close()
        if embedded is not None:
            await asyncio.to_thread(embedded.stop)


async def _create_workspace(store: Store, args: argparse.Namespace) -> dict[str, Any]:
    ws = await store.create_workspace(args.name)
    return {"workspace_id": str(ws.workspace_id)}


def _wire_duration(value: datetime.timedelta | None) -> duration_pb2.Duration | None:
    if value is None:
        return None
    out = duration_pb2.Duration()
    out.FromTimedelta(value)
    return out


_ENUM_PREFIX = re.compile(r"^(PRINCIPAL_KIND|WORKSPACE_ROLE|WEBHOOK_KIND|WEBHOOK_DELIVERY_STATE)_")


def _plain(message: Message) -> dict[str, Any]:
    """A response as the command prints it: proto field names, and enums by
    the short lower-case names the flags take (human, admin, runner)."""
    out = json_format.MessageToDict(
        message, always_print_fields_with_no_presence=True, preserving_proto_field_name=True
    )
    for key in ("kind", "role", "state"):
        if isinstance(out.get(key), str):
            out[key] = re.sub(
                r"^(PRINCIPAL_KIND|WORKSPACE_ROLE|WEBHOOK_KIND|WEBHOOK_DELIVERY_STATE)_",
                "",
                out[key],
            ).lower()
    return out


async def _operator_of(store: Store, object_id: uuid.UUID) -> Operator:
    return Operator(await store.admin.workspace_of(object_id))


async def _create_account(store: Store, args: argparse.Namespace) -> dict[str, Any]:
    r = await AdminApi(store.admin).create_account(
        Operator(args.workspace),
        ad.CreateAccountRequest(
            handle=args.handle,
            kind=ad.PRINCIPAL_KIND_HUMAN if args.kind == "human" else ad.PRINCIPAL_KIND_AGENT,
            owner_account_id=str(args.owner) if args.owner else "",
            parent_account_id=str(args.parent) if args.parent else "",
            role=ad.WORKSPACE_ROLE_ADMIN if args.role == "admin" else ad.WORKSPACE_ROLE_MEMBER,
            token_label=args.label,
            token_expires_in=_wire_duration(args.expires_in),
        ),
    )
    return {**_plain(r.account), "token": r.token, "token_id": r.token_info.token_id}


async def _create_runner(store: Store, args: argparse.Namespace) -> dict[str, Any]:
    r = await AdminApi(store.admin).create_runner(
        Operator(args.workspace),
        ad.CreateRunnerRequest(
            name=args.name,
            token_label=args.label,
            token_expires_in=_wire_duration(args.expires_in),
        ),
    )
    return {**_plain(r.runner), "token": r.token, "token_id": r.token_info.token_id}


async def _assign_agent(store: Store, args: argparse.Namespace) -> dict[str, Any]:
    await AdminApi(store.admin).assign_agent(
        await _operator_of(store, args.runner),
        ad.AssignAgentRequest(runner_id=str(args.runner), agent_account_id=str(args.agent)),
    )
    return {"runner_id": str(args.runner), "agent_id": str(args.agent)}


async def _unassign_agent(store: Store, args: argparse.Namespace) -> dict[str, Any]:
    r = await AdminApi(store.admin).unassign_agent(
        await _operator_of(store, args.runner),
        ad.UnassignAgentRequest(runner_id=str(args.runner), agent_account_id=str(args.agent)),
    )
    return {
        "runner_id": str(args.runner),
        "agent_id": str(args.agent),
        "sessions_unbound": r.sessions_unbound,
    }


async def _reparent_agent(store: Store, args: argparse.Namespace) -> dict[str, Any]:
    r = await AdminApi(store.admin).reparent_agent(
        await _operator_of(store, args.agent),
        ad.ReparentAgentRequest(
            agent_account_id=str(args.agent),
            parent_account_id=str(args.parent) if args.parent else "",
        ),
    )
    return _plain(r.account)


async def _set_role(store: Store, args: argparse.Namespace) -> dict[str, Any]:
    r = await AdminApi(store.admin).set_account_role(
        await _operator_of(store, args.account),
        ad.SetAccountRoleRequest(
            account_id=str(args.account),
            role=ad.WORKSPACE_ROLE_ADMIN if args.role == "admin" else ad.WORKSPACE_ROLE_MEMBER,
        ),
    )
    return _plain(r.account)


async def _every_page(call: Callable[[str], Awaitable[Any]], field: str) -> dict[str, Any]:
    items: list[dict[str, Any]] = []
    page_token = ""
    while True:
        page = await call(page_token)
        items.extend(_plain(m) for m in getattr(page, field))
        page_token = page.next_page_token
        if not page_token:
            return {field: items}


async def _list_accounts(store: Store, args: argparse.Namespace) -> dict[str, Any]:
    api, by = AdminApi(store.admin), Operator(args.workspace)
    return await _every_page(
        lambda t: api.list_accounts(by, ad.ListAccountsRequest(page_size=200, page_token=t)),
        "accounts",
    )


async def _list_runners(store: Store, args: argparse.Namespace) -> dict[str, Any]:
    api, by = AdminApi(store.admin), Operator(args.workspace)
    return await _every_page(
        lambda t: api.list_runners(by, ad.ListRunnersRequest(page_size=200, page_token=t)),
        "runners",
    )


async def _list_tokens(store: Store, args: argparse.Namespace) -> dict[str, Any]:
    api = AdminApi(store.admin)
    by = (
        Operator(args.workspace)
        if args.workspace
        else await _operator_of(store, args.account or args.runner)
    )
    return await _every_page(
        lambda t: api.list_tokens(
            by,
            ad.ListTokensRequest(
                account_id=str(args.account or ""),
                runner_id=str(args.runner or ""),
                include_inactive=args.all,
                page_size=200,
                page_token=t,
            ),
        ),
        "tokens",
    )


async def _create_token(store: Store, args: argparse.Namespace) -> dict[str, Any]:
    r = await AdminApi(store.admin).create_token(
        await _operator_of(store, args.account or args.runner),
        ad.CreateTokenRequest(
            account_id=str(args.account or ""),
            runner_id=str(args.runner or ""),
            label=args.label,
            expires_in=_wire_duration(args.expires_in),
        ),
    )
    return {**_plain(r.token_info), "token": r.token}


async def _create_hook_token(store: Store, args: argparse.Namespace) -> dict[str, Any]:
    try:
        policy = args.policy.read_text(encoding="utf-8") if args.policy else ""
    except (OSError, UnicodeDecodeError) as exc:
        raise InvalidArgument(f"can't read the policy file {args.policy}: {exc}") from None
    r = await AdminApi(store.admin).create_hook_token(
        await _operator_of(store, args.agent),
        ad.CreateHookTokenRequest(
            agent_account_id=str(args.agent),
            channel_id=str(args.channel),
            policy=policy,
            label=args.label,
            expires_in=_wire_duration(args.expires_in),
        ),
    )
    return {**_plain(r.token_info), "token": r.token, "rules": list(r.rules)}


async def _revoke_token(store: Store, args: argparse.Namespace) -> dict[str, Any]:
    r = await AdminApi(store.admin).revoke_token(
        await _operator_of(store, args.token_id),
        ad.RevokeTokenRequest(token_id=str(args.token_id)),
    )
    return _plain(r.token_info)


async def _rotate_token(store: Store, args: argparse.Namespace) -> dict[str, Any]:
    r = await AdminApi(store.admin).rotate_token(
        await _operator_of(store, args.token_id),
        ad.RotateTokenRequest(
            token_id=str(args.token_id),
            grace=_wire_duration(args.grace),
            expires_in=_wire_duration(args.expires_in),
        ),
    )
    return {**_plain(r.token_info), "token": r.token, "old_token": _plain(r.old_token_info)}


async def _create_webhook(store: Store, args: argparse.Namespace) -> dict[str, Any]:
    r = await args.admin_api.create_webhook(
        Operator(args.workspace),
        ad.CreateWebhookRequest(
            url=args.url,
            kind={
                "slack": ad.WEBHOOK_KIND_SLACK,
                "email": ad.WEBHOOK_KIND_EMAIL,
                "push": ad.WEBHOOK_KIND_PUSH,
            }.get(args.kind, ad.WEBHOOK_KIND_STANDARD),
            event_types=[t for t in args.events.split(",") if t.strip()],
        ),
    )
    return {**_plain(r.webhook), "secret": r.secret}


async def _list_webhooks(store: Store, args: argparse.Namespace) -> dict[str, Any]:
    api, by = args.admin_api, Operator(args.workspace)
    return await _every_page(
        lambda t: api.list_webhooks(by, ad.ListWebhooksRequest(page_size=200, page_token=t)),
        "webhooks",
    )


async def _disable_webhook(store: Store, args: argparse.Namespace) -> dict[str, Any]:
    r = await args.admin_api.disable_webhook(
        await _operator_of(store, args.webhook_id),
        ad.DisableWebhookRequest(webhook_id=str(args.webhook_id)),
    )
    return _plain(r.webhook)


async def _enable_webhook(store: Store, args: argparse.Namespace) -> dict[str, Any]:
    r = await args.admin_api.enable_webhook(
        await _operator_of(store, args.webhook_id),
        ad.EnableWebhookRequest(webhook_id=str(args.webhook_id)),
    )
    return _plain(r.webhook)


async def _delete_webhook(store: Store, args: argparse.Namespace) -> dict[str, Any]:
    await args.admin_api.delete_webhook(
        await _operator_of(store, args.webhook_id),
        ad.DeleteWebhookRequest(webhook_id=str(args.webhook_id)),
    )
    return {"webhook_id": str(args.webhook_id), "deleted": True}


async def _rotate_webhook_secret(store: Store, args: argparse.Namespace) -> dict[str, Any]:
    r = await args.admin_api.rotate_webhook_secret(
        await _operator_of(store, args.webhook_id),
        ad.RotateWebhookSecretRequest(
            webhook_id=str(args.webhook_id), grace=_wire_duration(args.grace)
        ),
    )
    return {**_plain(r.webhook), "secret": r.secret}


async def _list_deliveries(store: Store, args: argparse.Namespace) -> dict[str, Any]:
    states = {
        "pending": ad.WEBHOOK_DELIVERY_STATE_PENDING,
        "delivered": ad.WEBHOOK_DELIVERY_STATE_DELIVERED,
        "failed": ad.WEBHOOK_DELIVERY_STATE_FAILED,
    }
    r = await args.admin_api.list_webhook_deliveries(
        await _operator_of(store, args.webhook),
        ad.ListWebhookDeliveriesRequest(
            webhook_id=str(args.webhook),
            states=[states[args.state]] if args.state else [],
            page_size=args.limit,
            page_token=args.page_token,
        ),
    )
    return {
        "deliveries": [_plain(d) for d in r.deliveries],
        "next_page_token": r.next_page_token,
    }


async def _list_attempts(store: Store, args: argparse.Namespace) -> dict[str, Any]:
    r = await args.admin_api.get_webhook_delivery(
        await _operator_of(store, args.delivery_id),
        ad.GetWebhookDeliveryRequest(delivery_id=str(args.delivery_id)),
    )
    return {
        "delivery": _plain(r.delivery),
        "attempts": [_plain(a) for a in r.attempts],
        "body": r.body,
    }


async def _redeliver(store: Store, args: argparse.Namespace) -> dict[str, Any]:
    r = await args.admin_api.redeliver_webhook_delivery(
        await _operator_of(store, args.delivery_id),
        ad.RedeliverWebhookDeliveryRequest(delivery_id=str(args.delivery_id)),
    )
    return _plain(r.delivery)


_ADMIN: dict[str, Callable[[Store, argparse.Namespace], Awaitable[dict[str, Any]]]] = {
    "create-workspace": _create_workspace,
    "create-account": _create_account,
    "create-runner": _create_runner,
    "assign-agent": _assign_agent,
    "unassign-agent": _unassign_agent,
    "reparent-agent": _reparent_agent,
    "set-role": _set_role,
    "list-accounts": _list_accounts,
    "list-runners": _list_runners,
    "list-tokens": _list_tokens,
    "create-token": _create_token,
    "create-hook-token": _create_hook_token,
    "revoke-token": _revoke_token,
    "rotate-token": _rotate_token,
    "create-webhook": _create_webhook,
    "list-webhooks": _list_webhooks,
    "disable-webhook": _disable_webhook,
    "enable-webhook": _enable_webhook,
    "delete-webhook": _delete_webhook,
    "rotate-webhook-secret": _rotate_webhook_secret,
    "list-deliveries": _list_deliveries,
    "list-attempts": _list_attempts,
    "redeliver": _redeliver,
    **people_cli.HANDLERS,
    **follow_ups_cli.HANDLERS,
    **slack_cli.HANDLERS,
    **receipts_cli.HANDLERS,
}


def _run(coro: Awaitable[Any], event_loop: str) -> Any:
    if event_loop == "uvloop":
        try:
            import uvloop

            return uvloop.run(coro)  # type: ignore[arg-type]
        except ImportError:
            pass
    return asyncio.run(coro)  # type: ignore[arg-type]


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    args = _parser().parse_args(argv)
    unknown = environment.unknown()
    try:
        loaded = _loaded(args)
    except config.ConfigError as exc:
        for warning in unknown:
            print(f"compass-server: warning: {warning}", file=sys.stderr)
        if args.command == "admin":
            print(json.dumps({"error": exc.message}), file=sys.stderr)
            return 1
        print(f"compass-server: {exc.message}", file=sys.stderr)
        return 2
    settings = loaded.settings
    # An admin command's output is its one JSON object, config check's its
    # TOML; serve narrates.
    level = settings.log_level
    if args.command != "serve" and loaded.sources["log_level"] == "default":
        level = "WARNING"
    logs.configure(level, settings.log_format)
    for warning in [*unknown, *loaded.warnings]:
        log.warning("%s", warning)
    if args.command == "config":
        print(config.effective_toml(loaded), end="")
        return 0
    if args.command == "serve":
        try:
            if settings.workers > 1 and args.worker_of is None:
                asyncio.run(workers.Supervisor(settings, argv).run())
            else:
                _run(_serve(loaded, args.worker_of), settings.event_loop)
        except StartupError as exc:
            print(f"compass-server: {exc.message}", file=sys.stderr)
            return 2
        return 0
    try:
        local = receipts_cli.LOCAL.get(args.action)
        if local is not None:
            result = local(args, settings)
        else:
            result = _run(_admin(args, settings), settings.event_loop)
    except (StoreError, StartupError) as exc:
        print(json.dumps({"error": exc.message}), file=sys.stderr)
        return 1
    except OSError as exc:
        print(json.dumps({"error": f"{exc.filename}: {exc.strerror}"}), file=sys.stderr)
        return 1
    print(json.dumps(result))
    # A check that found the record altered fails, after saying what it found.
    return 0 if result.get("holds", True) else 1


if __name__ == "__main__":
    sys.exit(main())
