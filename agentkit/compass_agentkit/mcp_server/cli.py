"""`compass-mcp`: Compass as an MCP server, for any MCP client to launch.

    compass-mcp [--url HOST:PORT] [--token T] [--agent ID] [--channel ID]
                [--sandbox DIR] [--http HOST:PORT] [--wait-seconds N]
                [--progress-seconds S] [--tls] [--ca-cert FILE]
                [--client-cert FILE --client-key FILE]

It is one agent session on the relay, signed in with a runner token the
agent is assigned to, so attribution, presence (WAITING while its ask is
open), the delivery lane and reconnects work as for any runner. It serves
MCP over stdio (what clients launch) or, with --http, streamable HTTP at
http://HOST:PORT/mcp; then it prints one JSON line on stdout with the port.
Logs go to stderr: on stdio, stdout is the protocol's.
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

from compass_agentkit.mcp_server.session import AgentSession
from compass_agentkit.mcp_server.tools import Settings, build_server
from compass_agentkit.pictures import Sandbox
from compass_agentkit.relay import Relay
from compass_agentkit.runner import add_tls_flags, log_to_stderr, tls_from

__all__ = ["main"]

log = logging.getLogger("compass_mcp")

# Streamable HTTP sessions one compass-mcp serves at once; each is one
# client of the same agent.
HTTP_MAX_SESSIONS = 64
# The largest MCP request body over HTTP.
HTTP_MAX_BODY_BYTES = 1024 * 1024


def _address(url: str) -> str:
    """HOST:PORT from `HOST:PORT`, `http://HOST:PORT`, `https://HOST:PORT` or
    `grpc://HOST:PORT`."""
    for scheme in ("http://", "https://", "grpc://"):
        if url.startswith(scheme):
            url = url.removeprefix(scheme)
    url = url.rstrip("/")
    host, _, port = url.rpartition(":")
    if not host or not port.isdigit() or "/" in url:
        raise ValueError(f"{url!r} is not HOST:PORT (the Compass server's gRPC address)")
    return url


def _positive(kind: type[int] | type[float]) -> Any:
    def parse(text: str) -> int | float:
        value = kind(text)
        if value <= 0:
            raise argparse.ArgumentTypeError(f"{text} is not a positive number")
        return value

    return parse


def _parser() -> argparse.ArgumentParser:
    env = os.environ.get
    parser = argparse.ArgumentParser(
        prog="compass-mcp",
        description=(
            "Compass as an MCP server: tools to ask people and wait for their answer, read "
            "and post in channels, and keep an inbox, as one agent."
        ),
    )
    parser.add_argument(
        "--url",
        default=env("COMPASS_URL", "127.0.0.1:50051"),
        help="the Compass server's gRPC address, HOST:PORT; https://HOST:PORT connects with "
        "TLS ($COMPASS_URL; default %(default)s)",
    )
    add_tls_flags(parser)
    parser.add_argument(
        "--token",
        default=env("COMPASS_RUNNER_TOKEN"),
        help="a runner token the agent is assigned to ($COMPASS_RUNNER_TOKEN)",
    )
    parser.add_argument(
        "--agent",
        default=env("COMPASS_AGENT_ID"),
        help="the agent's account id ($COMPASS_AGENT_ID)",
    )
    parser.add_argument(
        "--channel",
        default=env("COMPASS_CHANNEL_ID"),
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
        default=int(env("COMPASS_MCP_WAIT_SECONDS", "3600")),
        help="the longest one `ask` call waits for its answer ($COMPASS_MCP_WAIT_SECONDS; "
        "default %(default)s)",
    )
    parser.add_argument(
        "--progress-seconds",
        type=_positive(float),
        default=15.0,
        help="how often a waiting `ask` reports progress (default %(default)s)",
    )
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


async def _run(args: argparse.Namespace) -> int:
    relay = Relay(_address(args.url), args.token, credentials=args.credentials)
    session = AgentSession(relay, args.agent)
    await session.start()
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
    if not args.token:
        parser.error("a runner token is required: --token or COMPASS_RUNNER_TOKEN")
    if not args.agent:
        parser.error("an agent id is required: --agent or COMPASS_AGENT_ID")
    try:
        _address(args.url)
        if args.http:
            _address(args.http)
        if args.sandbox:
            Sandbox(args.sandbox)
    except ValueError as exc:
        parser.error(str(exc))
    if args.url.startswith("https://"):
        args.tls = True
    tls_from(args, parser)
    log_to_stderr()
    return asyncio.run(_run(args))


if __name__ == "__main__":
    sys.exit(main())
