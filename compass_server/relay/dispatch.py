"""The relay's arm table: each CommsCallRequest arm → the api coroutine that
serves it, run as the session's bound agent.

To add an arm: add it to both oneofs in agent_gateway.proto under the same
name (the result arm carries that call's response), add one entry to
`arms_for`, and add its row to the relay's arm-coverage test. The rules stay
in the api and store layers; this table only routes.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

from google.protobuf.message import Message

from compass.v1 import agent_gateway_pb2 as gw
from compass_server.api import surface
from compass_server.api.agent import AgentApi
from compass_server.api.comms import CommsApi
from compass_server.api.errors import ApiError, Status, to_api_error
from compass_server.api.inbox import AgentInboxApi
from compass_server.store.blocks import MAX_MESSAGE_BYTES
from compass_server.store.messages import MAX_PAGE_BYTES
from compass_server.store.types import Actor, Surface
from compass_server.telemetry.calls import Observer

Arm = Callable[[Actor, Any], Awaitable[Message]]


def arms_for(comms: CommsApi, agent: AgentApi, inbox: AgentInboxApi) -> dict[str, Arm]:
    """Arm name (the same on CommsCallRequest.call and CommsCallResult.result)
    → the api method that runs it."""
    return {
        "post_message": comms.post_message,
        "post_ask": agent.post_ask,
        "list_messages": comms.list_messages,
        "list_channels": comms.list_channels,
        "get_message": comms.get_message,
        "search_messages": comms.search_messages,
        "open_dm": comms.open_dm,
        "create_channel": comms.create_channel,
        "add_channel_member": comms.add_channel_member,
        "update_topic": comms.update_topic,
        "set_status": agent.set_status,
        "cancel_ask": agent.cancel_ask,
        "inbox_post": inbox.inbox_post,
        "inbox_reply": inbox.inbox_reply,
        "inbox_close": inbox.inbox_close,
        "get_ask": agent.get_ask,
        "spawn_agent": agent.spawn_agent,
    }


# The most an arm's answer weighs, held for it before the call runs: pages of
# messages (a larger single message is a page alone) and of channels (each
# with its members); every other answer carries at most one message.
PAGE_ANSWER_BYTES = MAX_PAGE_BYTES + MAX_MESSAGE_BYTES
ANSWER_BYTES = {
    "list_messages": PAGE_ANSWER_BYTES,
    "search_messages": PAGE_ANSWER_BYTES,
    "list_channels": 1 << 20,
}
OTHER_ANSWER_BYTES = MAX_MESSAGE_BYTES + (16 << 10)


def answer_bytes(arm: str | None) -> int:
    """What to hold for the answer of a call of this arm."""
    return ANSWER_BYTES.get(arm or "", OTHER_ANSWER_BYTES)


def error_result(err: ApiError) -> gw.CommsCallResult:
    return gw.CommsCallResult(error=gw.CommsCallError(code=err.status.token, message=err.message))


class Dispatcher:
    def __init__(self, arms: Mapping[str, Arm], observer: Observer | None = None) -> None:
        self.arms = dict(arms)
        self.observer = observer or Observer(access=False)

    async def call(self, actor: Actor, request: gw.CommsCallRequest) -> gw.CommsCallResult:
        """Exactly one result: the matching arm, or the in-band error the same
        call would get as a status over gRPC. Its span continues the agent's
        turn from `trigger_traceparent` and links to the relay stream's."""
        arm = request.WhichOneof("call")
        with self.observer.call(
            "relay",
            f"relay/{arm or 'none'}",
            traceparent=request.trigger_traceparent,
            link_current=True,
        ) as call:
            call.signed_in(actor)
            result = await self._run(actor, request, arm)
            if result.WhichOneof("result") == "error":
                call.status = result.error.code
            return result

    async def _run(
        self, actor: Actor, request: gw.CommsCallRequest, arm: str | None
    ) -> gw.CommsCallResult:
        run = self.arms.get(arm) if arm is not None else None
        if arm is None or run is None:
            return error_result(
                ApiError(
                    Status.INVALID_ARGUMENT,
                    "the call sets no arm this server knows; set one of: " + ", ".join(self.arms),
                )
            )
        try:
            with surface.through(Surface.RELAY):
                response = await run(actor, getattr(request, arm))
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            return error_result(to_api_error(exc))
        result = gw.CommsCallResult()
        getattr(result, arm).CopyFrom(response)
        return result
