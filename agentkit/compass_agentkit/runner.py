"""`compass-runner`: a reference runner for Compass agents.

    compass-runner [--url URL] [--token TOKEN] [--sandbox DIR] --agent ID [--agent ID …]
    compass-runner [--url URL] [--token TOKEN] --agent ID --demo --channel ID

It signs in to the hub with a runner token (--token or COMPASS_RUNNER_TOKEN),
binds one session per agent assigned to it, and hands every delivery to the
agent's callback, acking it once the callback returns. When the stream drops
it reconnects with backoff, rebinds, and deliveries resume after the acked
cursor; when no connection is made at all within --connect-seconds of start
(a wrong address, say), it exits 1 naming what it tried. Logs go to stderr;
stdout carries only the agent's JSON lines.

Without --demo each agent is a printer: one JSON line per delivery. With
--demo the agent posts a two-question ask in --channel, waits on its delivery
lane for how it ends, prints that as one JSON line (the answers, or the words
of a decline, an expiry or the owner's withdraw) and exits 0. With --sandbox
DIR the agents' inbox tools attach pictures from that folder.

Exit codes: 0 done (or stopped by SIGINT/SIGTERM without --demo), 1 the hub
refused the token or an agent, could not be reached, or the demo was
stopped, 2 bad usage.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import dataclasses
import json
import logging
import os
import signal
import sys
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass

from compass.v1 import comms_pb2 as pb
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
from compass_agentkit.endings import AskEndings
from compass_agentkit.native_ask import answers_from_ask
from compass_agentkit.pictures import Sandbox
from compass_agentkit.relay import BoundSession, Relay, RelayError
from compass_agentkit.render import render_messages
from compass_agentkit.subagents import spawn_and_bind
from compass_agentkit.tools import Tool, ToolError, comms_tools

__all__ = ["DEMO_ASK", "AgentLane", "DemoAgent", "Runner", "main", "print_delivery"]

log = logging.getLogger("compass_runner")


@dataclass(frozen=True, slots=True)
class AgentLane:
    """One bound agent: its session and its comms tools."""

    session: BoundSession
    tools: dict[str, Tool]


AgentCallback = Callable[[AgentLane, pb.Event], Awaitable[None]]


def _emit(line: dict[str, object]) -> None:
    print(json.dumps(line, ensure_ascii=False), flush=True)


async def print_delivery(lane: AgentLane, event: pb.Event) -> None:
    """The default agent: each delivery as one JSON line on stdout."""
    kind = event.WhichOneof("kind") or ""
    text = ""
    if kind:
        payload = getattr(event, kind)
        # Channel messages and inbox changes carry a message; an inbox close has none.
        if "message" in payload.DESCRIPTOR.fields_by_name and payload.HasField("message"):
            text = render_messages([payload.message]).text
    _emit(
        {
            "agent_id": lane.session.agent_id,
            "session_id": lane.session.session_id,
            "event_id": event.event_id,
            "kind": kind,
            "text": text,
        }
    )


class Runner:
    """Binds each agent on one relay and routes its deliveries to `callback`."""

    def __init__(
        self,
        relay: Relay,
        agent_ids: Sequence[str],
        callback: AgentCallback,
        *,
        sandbox: Sandbox | None = None,
    ) -> None:
        self.relay = relay
        self.agent_ids = list(agent_ids)
        self.callback = callback
        # Where the agents' inbox tools read pictures from.
        self.sandbox = sandbox
        self.lanes: dict[str, AgentLane] = {}

    async def bind_all(self) -> list[AgentLane]:
        lanes = []
        for agent_id in self.agent_ids:
            lanes.append(await self.bind(agent_id))
        return lanes

    async def bind(self, agent_id: str) -> AgentLane:
        holder: list[AgentLane] = []

        async def deliver(event: pb.Event) -> None:
            await self.callback(holder[0], event)

        # The callback can't run before bind returns: the hub delivers only after bound.
        session = await self.relay.bind(agent_id, deliver)
        return self._lane(session, holder)

    async def spawn(self, parent: AgentLane, handle: str) -> AgentLane:
        """A sub-agent of `parent`, bound here at once; its deliveries go to
        the same callback. ToolError when the hub refuses it."""
        holder: list[AgentLane] = []

        async def deliver(event: pb.Event) -> None:
            await self.callback(holder[0], event)

        caller = self.relay.caller(parent.session.session_id)
        spawned = await spawn_and_bind(self.relay, caller, handle, deliver)
        return self._lane(spawned.session, holder)

    def _lane(self, session: BoundSession, holder: list[AgentLane]) -> AgentLane:
        caller = self.relay.caller(session.session_id)
        tools = comms_tools(caller, sandbox=self.sandbox)
        lane = AgentLane(session, {t.name: t for t in tools})
        holder.append(lane)
        self.lanes[session.session_id] = lane
        return lane


# --- the demo agent -------------------------------------------------------------------

DEMO_ASK: dict[str, object] = {
    "text": "The demo agent needs two decisions before it starts.",
    "questions": [
        {
            "id": "database",
            "question": "Which database should the demo service use?",
            "header": "Storage",
            "options": [
                {"label": "PostgreSQL", "description": "What Compass itself runs on"},
                {"label": "SQLite", "description": "One file, no server"},
            ],
            "recommended": 0,
        },
        {
            "id": "clients",
            "question": "Which client libraries should ship first?",
            "header": "Clients",
            "options": [{"label": "Python"}, {"label": "TypeScript"}, {"label": "Go"}],
            "multi": True,
        },
    ],
}


class DemoAgent:
    """Posts DEMO_ASK and waits on the delivery lane for how it ends."""

    def __init__(self) -> None:
        self.endings = AskEndings()
        # ask id → the event that ended it
        self.event_ids: dict[str, int] = {}

    async def on_delivery(self, lane: AgentLane, event: pb.Event) -> None:
        for ending in self.endings.hear(event, lane.session.agent_id):
            self.event_ids.setdefault(ending.ask.ask_id, event.event_id)

    async def ask(self, lane: AgentLane, channel_id: str) -> str:
        posted = await lane.tools["comms_post_ask"].send({**DEMO_ASK, "channel_id": channel_id})
        log.info(
            "posted ask %s (message %s) in channel %s; waiting for a person to answer",
            posted.ask_id,
            posted.message.message_id,
            channel_id,
        )
        return str(posted.ask_id)

    async def answer(self, ask_id: str) -> dict[str, object]:
        """The answers, or the words of another ending (a decline, an expiry,
        the owner's withdraw); deliveries may come before the post's result."""
        ending = await self.endings.wait(ask_id)
        line: dict[str, object] = {
            "ask_id": ask_id,
            "event_id": self.event_ids.get(ask_id, 0),
            "ending": ending.name,
        }
        if ending.name == "answered":
            line["answers"] = [dataclasses.asdict(r) for r in answers_from_ask(ending.ask)]
        else:
            line["text"] = ending.text
        return line


# --- the command ------------------------------------------------------------------------


def _parser() -> argparse.ArgumentParser:
    parser = Parser(prog="compass-runner", description="Run Compass agents over the hub's relay.")
    parser.add_argument(
        "--version", action="version", version=f"%(prog)s {version('compass-agentkit')}"
    )
    add_url_flag(parser)
    parser.add_argument(
        "--token",
        default=os.environ.get("COMPASS_RUNNER_TOKEN"),
        metavar="TOKEN",
        help="the runner token (default: $COMPASS_RUNNER_TOKEN)",
    )
    parser.add_argument(
        "--agent",
        action="append",
        required=True,
        metavar="ID",
        help="the account id of an agent assigned to this runner (repeat for more)",
    )
    parser.add_argument(
        "--sandbox",
        default=os.environ.get("COMPASS_SANDBOX"),
        metavar="DIR",
        help="the folder the agents' inbox tools read pictures from ($COMPASS_SANDBOX; "
        "without it they take no pictures)",
    )
    add_connect_flag(parser)
    add_tls_flags(parser)
    parser.add_argument(
        "--demo",
        action="store_true",
        help="run the scripted demo agent: it asks in --channel, prints how the ask ended "
        "and exits",
    )
    parser.add_argument("--channel", metavar="ID", help="the channel the demo agent asks in")
    return parser


async def _until(work: Awaitable[int], *stops: Awaitable[object]) -> int | None:
    """Runs `work` until it finishes (its exit code) or a stop fires (None)."""
    task = asyncio.ensure_future(work)
    waiters = [asyncio.ensure_future(s) for s in stops]
    try:
        await asyncio.wait([task, *waiters], return_when=asyncio.FIRST_COMPLETED)
        return task.result() if task.done() else None
    finally:
        for pending in [task, *waiters]:
            pending.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task


async def _run(args: argparse.Namespace) -> int:
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    lost: list[RelayError] = []

    def on_lost(session_id: str, error: RelayError) -> None:
        lost.append(error)
        stop.set()

    relay = Relay(
        args.address,
        args.token,
        on_lost=on_lost,
        credentials=args.credentials,
        connect_seconds=args.connect_seconds,
    )
    await relay.start()
    demo = DemoAgent()
    runner = Runner(
        relay,
        args.agent,
        demo.on_delivery if args.demo else print_delivery,
        sandbox=Sandbox(args.sandbox) if args.sandbox else None,
    )

    async def work() -> int:
        lanes = await runner.bind_all()
        if not args.demo:
            await stop.wait()
            return 0
        ask_id = await demo.ask(lanes[0], args.channel)
        result = await demo.answer(ask_id)
        # Closed first, so the answer's delivery is acked before it is printed.
        await relay.close()
        _emit(result)
        return 0

    failure: Exception | None = None
    try:
        code = await _until(work(), stop.wait(), relay.wait_failed())
    except (RelayError, ToolError) as exc:
        failure, code = exc, 1
    finally:
        await relay.close()
    failure = relay.failure or (lost[0] if lost else failure)
    if failure is not None:
        print(f"compass-runner: {failure}", file=sys.stderr)
        return 1
    if code is None:
        # Stopped by a signal: fine for a long-running runner, not for the demo.
        return 1 if args.demo else 0
    return code


def main(argv: list[str] | None = None) -> int:
    parser = _parser()
    args = parser.parse_args(argv)
    warn_unknown_environment(parser.prog)
    if not args.token:
        parser.error("a runner token is required: --token or COMPASS_RUNNER_TOKEN")
    if args.demo and (not args.channel or len(args.agent) != 1):
        parser.error("--demo takes one --agent and a --channel to ask in")
    try:
        args.address, https = address(args.url)
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
