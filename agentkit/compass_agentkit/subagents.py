"""Sub-agents: an agent spawns one under itself (the spawn_agent arm, sent
as the parent) and its runner binds it on the same relay at once, so the
sub-agent reads and asks in its parent's channels under its own name.

    spawned = await spawn_and_bind(relay, relay.caller(parent_session_id), "planner", heard)

This is the kit's one way to do it: Runner.spawn and compass-mcp's
spawn_agent both come here.
"""

from __future__ import annotations

from dataclasses import dataclass

from compass.v1 import comms_pb2 as pb
from compass_agentkit.relay import BoundSession, Caller, DeliveryHandler, Relay, RelayError
from compass_agentkit.tools import SPECS, Tool, ToolError

__all__ = ["SPAWN_TOOL", "SubAgent", "spawn_and_bind"]

SPAWN_TOOL = "comms_spawn_agent"


@dataclass(frozen=True, slots=True)
class SubAgent:
    account: pb.Account
    session: BoundSession


async def spawn_and_bind(
    relay: Relay, parent: Caller, handle: str, on_delivery: DeliveryHandler
) -> SubAgent:
    """Creates the sub-agent as the parent (`parent` is the parent session's
    caller) and binds it on `relay`; ToolError when either step fails."""
    spec = next(spec for spec in SPECS if spec.name == SPAWN_TOOL)
    spawned = await Tool(spec, parent).send({"handle": handle})
    agent = spawned.agent
    try:
        session = await relay.bind(agent.account_id, on_delivery)
    except RelayError as exc:
        # The account exists: say so, so the agent doesn't spawn it again.
        raise ToolError(
            SPAWN_TOOL,
            exc.code,
            f'sub-agent @{agent.handle} id="{agent.account_id}" was created but could not be '
            f"bound: {exc.message}",
        ) from None
    return SubAgent(agent, session)
