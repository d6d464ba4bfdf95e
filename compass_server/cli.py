"""`compass-server`: the operator's entry points.

    compass-server serve [--grpc-listen [H:]P] [--http-listen [H:]P]
                         [--database-url URL] [--data-dir D]
    compass-server admin create-workspace NAME
    compass-server admin create-account --workspace ID --handle H --kind human|agent [--owner ID]
    compass-server admin create-runner --workspace ID --name N
    compass-server admin assign-agent --runner ID --agent ID

Without --database-url (or COMPASS_DATABASE_URL) every command uses an
embedded PostgreSQL kept under the data dir (default ./.compass); serve
creates it on first start, admin commands only use one that exists. A failure
to start is one line on stderr and exit status 2 for serve, one JSON error
object and exit status 1 for admin.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import logging
import os
import pathlib
import signal
import sys
import uuid
from collections.abc import Awaitable, Callable
from typing import Any

from compass_server.app import (
    DEFAULT_GRPC_LISTEN,
    DEFAULT_HTTP_LISTEN,
    CompassServer,
    Settings,
    StartupError,
    open_database,
)
from compass_server.store import Store, StoreError
from compass_server.store.types import AccountKind

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
        help="create workspaces, accounts and runners",
        usage="%(prog)s [-h] ACTION ...",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        description="Create workspaces, accounts and runners in the server's database. Each\n"
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
    runner = action("create-runner")
    runner.add_argument("--workspace", required=True, type=uuid.UUID)
    runner.add_argument("--name", required=True)
    assign = action("assign-agent")
    assign.add_argument("--runner", required=True, type=uuid.UUID)
    assign.add_argument("--agent", required=True, type=uuid.UUID)
    for sub in (ws, acct, runner, assign):
        _database_flags(sub)
    return parser


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


async def _create_account(store: Store, args: argparse.Namespace) -> dict[str, Any]:
    account, token = await store.create_account(
        args.workspace, args.handle, AccountKind(args.kind), args.owner
    )
    return {"account_id": str(account.account_id), "token": token}


async def _create_runner(store: Store, args: argparse.Namespace) -> dict[str, Any]:
    runner, token = await store.create_runner(args.workspace, args.name)
    return {"runner_id": str(runner.runner_id), "token": token}


async def _assign_agent(store: Store, args: argparse.Namespace) -> dict[str, Any]:
    workspace_id = await store.runner_workspace(args.runner)
    await store.assign_agent(workspace_id, args.runner, args.agent)
    return {"runner_id": str(args.runner), "agent_id": str(args.agent)}


_ADMIN: dict[str, Callable[[Store, argparse.Namespace], Awaitable[dict[str, Any]]]] = {
    "create-workspace": _create_workspace,
    "create-account": _create_account,
    "create-runner": _create_runner,
    "assign-agent": _assign_agent,
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
