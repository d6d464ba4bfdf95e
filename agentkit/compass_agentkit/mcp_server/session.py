"""The MCP server's one agent session on the relay.

It binds in the background; compass-mcp waits for that bind (`bound`)
before it serves, so a refused token or agent shows at start, and tool calls
wait for a bind still pending (up to the relay's call timeout). The
relay reconnects and rebinds by itself, and the hub resumes the delivery
lane after the acked cursor, so an answer given while the connection was
down still arrives. From the lane the session takes only what ends the
agent's asks (`AskEndings.hear`), kept in `endings` for whoever waits.

Sub-agents the agent spawns are sessions of their own on the same relay,
bound at once and kept by handle in the root session's `subagents` for as
long as the process runs.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging

from compass.v1 import agent_gateway_pb2 as gw
from compass.v1 import comms_pb2 as pb
from compass_agentkit.endings import AskEndings
from compass_agentkit.relay import BoundSession, CallUnavailable, Relay, RelayError
from compass_agentkit.subagents import spawn_and_bind

__all__ = ["AgentSession"]

log = logging.getLogger(__name__)


class AgentSession:
    def __init__(self, relay: Relay, agent_id: str, *, root: AgentSession | None = None) -> None:
        self.relay = relay
        self.agent_id = agent_id
        self.handle = ""
        # On the root session: the sub-agents spawned through it, by handle.
        self.subagents: dict[str, AgentSession] = {}
        self.endings = AskEndings()
        self._bound: asyncio.Future[BoundSession] = asyncio.get_running_loop().create_future()
        # Set once the session can't go on: the hub refused it or lost it for good.
        self.failure: RelayError | None = None
        self._failed = asyncio.Event()
        self._tasks: list[asyncio.Task[None]] = []
        if root is None:
            relay.on_lost = self._lost

    async def start(self) -> None:
        await self.relay.start()
        loop = asyncio.get_running_loop()
        self._tasks = [loop.create_task(self._bind()), loop.create_task(self._watch())]

    async def close(self) -> None:
        for task in self._tasks:
            task.cancel()
        for task in self._tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await task
        await self.relay.close()

    def _lost(self, session_id: str, error: RelayError) -> None:
        for sub in self.subagents.values():
            if sub._bound.done() and sub._bound.result().session_id == session_id:
                sub._fail(error)
                return
        self._fail(error)

    async def spawn(self, handle: str, parent: AgentSession) -> AgentSession:
        """A sub-agent of `parent` (this session or one of its sub-agents),
        bound at once; ToolError when the hub refuses it."""
        sub = AgentSession(self.relay, "", root=self)
        spawned = await spawn_and_bind(self.relay, parent.call, handle, sub._heard)
        sub.agent_id = spawned.account.account_id
        sub.handle = spawned.account.handle
        sub._bound.set_result(spawned.session)
        self.subagents[sub.handle] = sub
        if self.relay.failure is not None:
            # The relay stopped for good while it was bound: _watch already ran.
            sub._fail(self.relay.failure)
        return sub

    def _fail(self, error: RelayError) -> None:
        if self.failure is None:
            self.failure = error
            log.error("the agent session ended: %s", error)
            self._failed.set()
        if not self._bound.done():
            self._bound.set_exception(error)
            self._bound.exception()  # retrieved: nobody may be waiting yet

    async def _bind(self) -> None:
        try:
            session = await self.relay.bind(self.agent_id, self._heard)
        except RelayError as exc:
            self._fail(exc)
            return
        log.info("bound agent %s as session %s", self.agent_id, session.session_id)
        self._bound.set_result(session)

    async def _watch(self) -> None:
        failure = await self.relay.wait_failed()
        for session in [self, *self.subagents.values()]:
            session._fail(failure)

    async def wait_failed(self) -> RelayError:
        await self._failed.wait()
        assert self.failure is not None
        return self.failure

    async def bound(self) -> BoundSession:
        """The session once the hub bound it: the failure when it refused it,
        CallUnavailable when that takes longer than a call may."""
        return await self._session()

    async def _session(self) -> BoundSession:
        if self.failure is not None:
            raise self.failure
        try:
            async with asyncio.timeout(self.relay.call_timeout):
                return await asyncio.shield(self._bound)
        except TimeoutError:
            raise CallUnavailable(
                f"Compass at {self.relay.address} did not take this agent's session within "
                f"{self.relay.call_timeout:g}s; it keeps retrying"
            ) from None

    async def call(self, request: gw.CommsCallRequest) -> gw.CommsCallResult:
        """What the comms tools take: a call as this session's agent."""
        session = await self._session()
        return await self.relay.call(session.session_id, request)

    async def _heard(self, event: pb.Event) -> None:
        # Everything on the lane but endings is for agents that read it turn by turn.
        for ending in self.endings.hear(event, self.agent_id):
            log.info("ask %s ended: %s", ending.ask.ask_id, ending.name)
