"""`compass-server`: the operator's entry points.

    compass-server serve [--grpc-listen [H:]P] [--http-listen [H:]P]
                         [--database-url URL] [--data-dir D]
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
    compass-server admin revoke-token TOKEN_ID
    compass-server admin rotate-token TOKEN_ID [--grace D] [--expires-in D]

Durations D are seconds, or a number with s, m, h or d (90d, 12h).

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
import os
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
from compass_server.api.admin import AdminApi
from compass_server.app import (
    DEFAULT_GRPC_LISTEN,
    DEFAULT_HTTP_LISTEN,
    CompassServer,
    Settings,
    StartupError,
    open_database,
)
from compass_server.store import Store, StoreError
from compass_server.store.types import Operator

log = logging.getLogger("compass_server")


def _database_flags(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--database-url",
        default=os.environ.get("COMPASS_DATABASE_URL"),
        help="PostgreSQL URL (default: $COMPASS_DATABASE_URL, else the embedded PostgreSQL)",
    )
    p.add_argument(
        "--data-dir",
        type=pathlib.Path,
        default=pathlib.Path(os.environ.get("COMPASS_DATA_DIR", ".compass")),
        help="where the embedded PostgreSQL keeps its data (default: $COMPASS_DATA_DIR, "
        "else ./.compass)",
    )


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
    "revoke-token": "refuses a token from now on, on every server",
    "rotate-token": "replaces a token with a new secret; the old one ends",
}


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="compass-server", description=__doc__.split("\n")[0])
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    serve = commands.add_parser(
        "serve", help="run the server", description="Run the server until SIGINT or SIGTERM."
    )
    _database_flags(serve)
    serve.add_argument(
        "--grpc-listen",
        default=DEFAULT_GRPC_LISTEN,
        metavar="[HOST:]PORT",
        help=f"gRPC address; a bare port is on 127.0.0.1 (default {DEFAULT_GRPC_LISTEN})",
    )
    serve.add_argument(
        "--http-listen",
        default=DEFAULT_HTTP_LISTEN,
        metavar="[HOST:]PORT",
        help="Connect and the web page; a bare port is on 127.0.0.1 "
        f"(default {DEFAULT_HTTP_LISTEN})",
    )
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
        return actions.add_parser(name, description=summary[0].upper() + summary[1:] + ".")

    ws = action("create-workspace")
    ws.add_argument("name")
    acct = action("create-account")
    acct.add_argument("--workspace", required=True, type=uuid.UUID)
    acct.add_argument("--handle", required=True)
    acct.add_argument("--kind", required=True, choices=["human", "agent"])
    acct.add_argument("--owner", type=uuid.UUID, help="the owning human (agents only)")
    acct.add_argument(
        "--parent",
        type=uuid.UUID,
        help="the agent above this one (agents only; its owner is the default --owner)",
    )
    acct.add_argument("--role", choices=["member", "admin"], default="member")
    runner = action("create-runner")
    runner.add_argument("--workspace", required=True, type=uuid.UUID)
    runner.add_argument("--name", required=True)
    for issuing in (acct, runner):
        _token_flags(issuing)
    assign = action("assign-agent")
    assign.add_argument("--runner", required=True, type=uuid.UUID)
    assign.add_argument("--agent", required=True, type=uuid.UUID)
    unassign = action("unassign-agent")
    unassign.add_argument("--runner", required=True, type=uuid.UUID)
    unassign.add_argument("--agent", required=True, type=uuid.UUID)
    move = action("reparent-agent")
    move.add_argument("--agent", required=True, type=uuid.UUID)
    move.add_argument(
        "--parent", type=uuid.UUID, help="the agent to put it under (default: make it a root)"
    )
    role = action("set-role")
    role.add_argument("--account", required=True, type=uuid.UUID)
    role.add_argument("--role", required=True, choices=["member", "admin"])
    accounts = action("list-accounts")
    accounts.add_argument("--workspace", required=True, type=uuid.UUID)
    runners = action("list-runners")
    runners.add_argument("--workspace", required=True, type=uuid.UUID)
    tokens = action("list-tokens")
    whose = tokens.add_mutually_exclusive_group(required=True)
    whose.add_argument("--workspace", type=uuid.UUID)
    whose.add_argument("--account", type=uuid.UUID)
    whose.add_argument("--runner", type=uuid.UUID)
    tokens.add_argument("--all", action="store_true", help="also revoked and expired tokens")
    create = action("create-token")
    owner = create.add_mutually_exclusive_group(required=True)
    owner.add_argument("--account", type=uuid.UUID)
    owner.add_argument("--runner", type=uuid.UUID)
    _token_flags(create)
    revoke = action("revoke-token")
    revoke.add_argument("token_id", type=uuid.UUID)
    rotate = action("rotate-token")
    rotate.add_argument("token_id", type=uuid.UUID)
    rotate.add_argument(
        "--grace",
        type=_duration,
        help="how long the old token keeps working (default: it is revoked at once)",
    )
    rotate.add_argument(
        "--expires-in",
        type=_duration,
        help="the new token's lifetime (default: as long as the old one's)",
    )
    for sub in (
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
    ):
        _database_flags(sub)
    return parser


_DURATION = re.compile(r"^(\d+)([smhd]?)$")
_UNIT = {"": 1, "s": 1, "m": 60, "h": 3600, "d": 86400}


def _duration(text: str) -> datetime.timedelta:
    m = _DURATION.match(text.strip())
    if m is None:
        raise argparse.ArgumentTypeError(f"{text!r} is not a duration like 3600, 90m, 12h or 30d")
    return datetime.timedelta(seconds=int(m.group(1)) * _UNIT[m.group(2)])


def _token_flags(p: argparse.ArgumentParser) -> None:
    p.add_argument("--label", default="", help="a label for the token, e.g. where it is used")
    p.add_argument(
        "--expires-in", type=_duration, help="the token's lifetime (default: never expires)"
    )


async def _serve(args: argparse.Namespace) -> None:
    server = CompassServer(
        Settings(
            database_url=args.database_url,
            data_dir=args.data_dir,
            grpc_listen=args.grpc_listen,
            http_listen=args.http_listen,
        )
    )
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    await server.start()
    # What start-up built lives as long as the process: keep it out of every
    # collection's scan.
    gc.freeze()
    print(
        json.dumps({"grpc_port": server.grpc_port, "http_port": server.http_port, "ready": True}),
        flush=True,
    )
    await stop.wait()
    log.info("shutting down")
    await server.stop()
    log.info("stopped")


async def _admin(args: argparse.Namespace) -> dict[str, Any]:
    settings = Settings(database_url=args.database_url, data_dir=args.data_dir)
    # Never a new embedded database: ids minted there would be unknown to the server.
    db, embedded = await open_database(settings, create=False, min_size=1, max_size=2)
    try:
        store = Store(db)
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


def _plain(message: Message) -> dict[str, Any]:
    """A response as the command prints it: proto field names, and enums by
    the short lower-case names the flags take (human, admin, runner)."""
    out = json_format.MessageToDict(
        message, always_print_fields_with_no_presence=True, preserving_proto_field_name=True
    )
    for key in ("kind", "role"):
        if isinstance(out.get(key), str):
            out[key] = re.sub(r"^(PRINCIPAL_KIND|WORKSPACE_ROLE)_", "", out[key]).lower()
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
    "revoke-token": _revoke_token,
    "rotate-token": _rotate_token,
}


def _run(coro: Awaitable[Any]) -> Any:
    if os.environ.get("COMPASS_EVENT_LOOP", "uvloop") == "uvloop":
        try:
            import uvloop

            return uvloop.run(coro)  # type: ignore[arg-type]
        except ImportError:
            pass
    return asyncio.run(coro)  # type: ignore[arg-type]


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    # An admin command's output is its one JSON object; serve narrates.
    default_level = "INFO" if args.command == "serve" else "WARNING"
    logging.basicConfig(
        level=os.environ.get("COMPASS_LOG_LEVEL", default_level),
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
        stream=sys.stderr,
    )
    if args.command == "serve":
        try:
            _run(_serve(args))
        except StartupError as exc:
            print(f"compass-server: {exc.message}", file=sys.stderr)
            return 2
        return 0
    try:
        result = _run(_admin(args))
    except (StoreError, StartupError) as exc:
        print(json.dumps({"error": exc.message}), file=sys.stderr)
        return 1
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
