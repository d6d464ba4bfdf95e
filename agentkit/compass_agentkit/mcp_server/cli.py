"""`compass-mcp`: Compass as an MCP server, for any MCP client to launch.

    compass-mcp [--url URL] [--token TOKEN] [--agent ID] [--channel ID]
                [--sandbox DIR] [--http HOST:PORT] [--wait-seconds SECONDS]
                [--progress-seconds SECONDS] [--connect-seconds SECONDS]
                [--tls] [--ca-cert FILE] [--client-cert FILE --client-key FILE]

It is one agent session on the relay, signed in with a runner token the
agent is assigned to, so attribution, presence (WAITING while its ask is
open), the delivery lane and reconnects work as for any runner. Before it
serves it checks that the server takes its token and agent: a refusal, or
no connection within --connect-seconds, is one line on stderr and exit
status 1. It serves MCP over stdio (what clients launch) or, with --http,
streamable HTTP at http://HOST:PORT/mcp; then it prints one JSON line on
stdout with the port. Logs go to stderr: on stdio, stdout is the protocol's.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import logging
import os
import signal
import socket
import sys
from typing import Any

from compass_agentkit.command import (
    Parser,
    add_connect_flag,
    add_tls_flags,
    add_url_flag,
    address,
    log_to_stderr,
    tls_from,
    version,
    warn_unknown_environment,
)
from compass_agentkit.mcp_server.session import AgentSession
from compass_agentkit.mcp_server.tools import Settings, build_server
from compass_agentkit.pictures import Sandbox
from compass_agentkit.relay import CallUnavailable, Relay, RelayError

__all__ = ["main"]

log = logging.getLogger("compass_mcp")

# Streamable HTTP sessions one compass-mcp serves at once; each is one
# client of the same agent.
HTTP_MAX_SESSIONS = 64
# The largest MCP request body over HTTP.
HTTP_MAX_BODY_BYTES = 1024 * 1024


def _positive(kind: type[int] | type[float]) -> Any:
    what = "a whole number of seconds" if kind is int else "a number of seconds"

    def parse(text: str) -> int | float:
        try:
            value = kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not {what}") from None
        if not value > 0:
            raise argparse.ArgumentTypeError(f"{text} is not {what} above 0")
        return value

    return parse


def _parser() -> argparse.ArgumentParser:
    env = os.environ.get
    parser = Parser(
        prog="compass-mcp",
        description=(
            "Compass as an MCP server: tools to ask people and wait for their answer, read "
            "and post in channels, and keep an inbox, as one agent."
        ),
    )
    parser.add_argument(
        "--version", action="version", version=f"%(prog)s {version('compass-agentkit')}"
    )
    add_url_flag(parser)
    add_tls_flags(parser)
    parser.add_argument(
        "--token",
        default=env("COMPASS_RUNNER_TOKEN"),
        metavar="TOKEN",
        help="a runner token the agent is assigned to ($COMPASS_RUNNER_TOKEN)",
    )
    parser.add_argument(
        "--agent",
        default=env("COMPASS_AGENT_ID"),
        metavar="ID",
        help="the agent's account id ($COMPASS_AGENT_ID)",
    )
    parser.add_argument(
        "--channel",
        default=env("COMPASS_CHANNEL_ID"),
        metavar="ID",
        help="the channel `ask` posts in when a call names none ($COMPASS_CHANNEL_ID)",
    )
    parser.add_argument(
        "--sandbox",
        default=env("COMPASS_SANDBOX"),
        metavar="DIR",
        help="the folder the inbox tools read pictures from; none outside it "
        "($COMPASS_SANDBOX; without it the inbox tools take no pictures)",
    )
    parser.add_argument(
        "--http",
        metavar="HOST:PORT",
        help="serve streamable HTTP at http://HOST:PORT/mcp instead of stdio (port 0: any)",
    )
    parser.add_argument(
        "--wait-seconds",
        type=_positive(int),
        metavar="SECONDS",
        default=env("COMPASS_MCP_WAIT_SECONDS", "3600"),
        help="the longest one `ask` call waits for its answer, whole seconds "
        "($COMPASS_MCP_WAIT_SECONDS; default %(default)s)",
    )
    parser.add_argument(
        "--progress-seconds",
        type=_positive(float),
        metavar="SECONDS",
        default=15.0,
        help="how often a waiting `ask` reports progress (default %(default)s)",
    )
    add_connect_flag(parser)
    return parser


async def _serve_http(server: Any, listen: str) -> None:
    import uvicorn

    host, _, port = listen.rpartition(":")
    sock = socket.create_server((host, int(port)))
    app = server.streamable_http_app(
        host=host, max_sessions=HTTP_MAX_SESSIONS, max_request_body_size=HTTP_MAX_BODY_BYTES
    )
    bound = sock.getsockname()[1]
    config = uvicorn.Config(app, log_level="warning", lifespan="on")
    print(json.dumps({"http_port": bound, "url": f"http://{host}:{bound}/mcp"}), flush=True)
    await uvicorn.Server(config).serve(sockets=[sock])


async def _serve_stdio(server: Any) -> None:
    task = asyncio.ensure_future(server.run_stdio_async())
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, task.cancel)
    with contextlib.suppress(asyncio.CancelledError):
        await task


async def _started(args: argparse.Namespace) -> AgentSession | None:
    """The agent's session, once the server took its token and bound the
    agent; None (said on stderr) when it refused either or was never reached."""
    relay = Relay(
        args.address,
        args.token,
        credentials=args.credentials,
        connect_seconds=args.connect_seconds,
    )
    session = AgentSession(relay, args.agent)
    await session.start()
    try:
        await session.bound()
    except CallUnavailable:
        # Reached but slow, or --connect-seconds 0: tools wait for the bind.
        log.warning("the agent's session is not bound yet; serving, and tools wait for it")
    except RelayError as exc:
        await session.close()
        whom = "this runner's token" if relay.failure is exc else f"agent {args.agent}"
        if exc.code == "unavailable":
            print(f"compass-mcp: {exc.message}", file=sys.stderr)
        else:
            print(
                f"compass-mcp: the Compass server at {args.address} refused {whom}: "
                f"{exc.code}: {exc.message}",
                file=sys.stderr,
            )
        return None
    return session


async def _run(args: argparse.Namespace) -> int:
    session = await _started(args)
    if session is None:
        return 1
    settings = Settings(
        channel_id=args.channel or None,
        wait_seconds=args.wait_seconds,
        progress_seconds=args.progress_seconds,
        sandbox=Sandbox(args.sandbox) if args.sandbox else None,
    )
    server = build_server(session, settings)
    try:
        if args.http:
            await _serve_http(server, args.http)
        else:
            await _serve_stdio(server)
    finally:
        await session.close()
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = _parser()
    args = parser.parse_args(argv)
    warn_unknown_environment(parser.prog)
    if not args.token:
        parser.error("a runner token is required: --token or COMPASS_RUNNER_TOKEN")
    if not args.agent:
        parser.error("an agent id is required: --agent or COMPASS_AGENT_ID")
    try:
        args.address, https = address(args.url)
        if args.http:
            address(args.http, "where --http serves MCP")
        if args.sandbox:
            Sandbox(args.sandbox)
    except ValueError as exc:
        parser.error(str(exc))
    args.tls = args.tls or https
    tls_from(args, parser)
    log_to_stderr()
    return asyncio.run(_run(args))


if __name__ == "__main__":
    sys.exit(main())
