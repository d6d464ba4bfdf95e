"""What only an agent does, through the relay: post an ask, set its own
status, withdraw its own ask, read one ask by id, spawn a sub-agent.
Everything else an agent does is CommsApi."""

from __future__ import annotations

from compass.v1 import agent_gateway_pb2 as gw
from compass.v1 import comms_pb2 as pb
from compass_server.api import mapping as wire
from compass_server.api import surface
from compass_server.api.comms import CommsApi
from compass_server.store import InvalidArgument, Store
from compass_server.store.types import Actor


class AgentApi:
    def __init__(self, store: Store, comms: CommsApi) -> None:
        self.store = store
        self.comms = comms

    async def post_ask(self, actor: Actor, req: gw.PostAskRequest) -> gw.PostAskResponse:
        """An optional text block and the ask, posted as one message by PostMessage's rules."""
        if not req.HasField("ask"):
            raise InvalidArgument("ask is required")
        blocks = [pb.MessageBlock(text=pb.TextBlock(text=req.text))] if req.text else []
        blocks.append(pb.MessageBlock(ask=req.ask))
        posted = await self.comms.post_message(
            actor,
            pb.PostMessageRequest(
                channel_id=req.channel_id,
                blocks=blocks,
                client_key=req.client_key,
                allow_identical=req.allow_identical,
            ),
        )
        ask_id = next(b.ask.ask_id for b in posted.message.blocks if b.HasField("ask"))
        return gw.PostAskResponse(message=posted.message, ask_id=ask_id, outcome=posted.outcome)

    async def set_status(
        self, actor: Actor, req: gw.SetAgentStatusRequest
    ) -> gw.SetAgentStatusResponse:
        state = wire.PRESENCE_FROM_WIRE.get(req.state)
        if state is None:
            raise InvalidArgument("state must be PRESENCE_STATE_IDLE or PRESENCE_STATE_WORKING")
        presence = await self.store.set_status(actor, state, req.text)
        return gw.SetAgentStatusResponse(presence=wire.presence_to_wire(presence))

    async def cancel_ask(self, actor: Actor, req: gw.CancelAskRequest) -> gw.CancelAskResponse:
        """Author only; a repeat succeeds and changes nothing (the store's rule)."""
        await self.store.cancel_ask(actor, req.ask_id, surface=surface.current())
        return gw.CancelAskResponse()

    async def get_ask(self, actor: Actor, req: gw.GetAskRequest) -> gw.GetAskResponse:
        message, ask = await self.store.get_ask(actor, req.ask_id)
        stamp = self.comms.receipts.stamp(actor.workspace_id)
        return gw.GetAskResponse(
            message=wire.message_to_wire(message, stamp),
            ask=wire.ask_to_wire(ask, stamp(message, ask)),
        )

    async def spawn_agent(self, actor: Actor, req: gw.SpawnAgentRequest) -> gw.SpawnAgentResponse:
        """A sub-agent under the caller, assigned to the caller's runner."""
        agent = await self.store.admin.spawn_agent(actor, req.handle)
        return gw.SpawnAgentResponse(agent=wire.account_to_wire(agent))
