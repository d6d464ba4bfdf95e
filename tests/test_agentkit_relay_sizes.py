"""One agent's big call or big read must not drop the relay stream its
runner's other agents share: a call over the server's request limit is
refused before it is sent."""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

import pytest

from compass.v1 import agent_gateway_pb2 as gw
from compass.v1 import comms_pb2 as pb
from compass_agentkit import relay as relay_module
from compass_agentkit.relay import Relay, RelayError
from compass_agentkit.tools import Tool, ToolError, comms_tools
from tests.relay_client import runner_for
from tests.world import World


@dataclass
class Two:
    relay: Relay
    session_id: str  # scout's
    scout: dict[str, Tool]
    other: dict[str, Tool]  # a second agent on the same runner, the same stream
    w: World


@pytest.fixture
async def two(server: Any, api_world: World) -> AsyncIterator[Two]:
    w = api_world
    other = await w.add_account("other-agent", kind=w.agent.kind)
    await w.store.add_channel_member(w.human, w.channel.channel_id, other.account_id)
    relay = Relay(f"127.0.0.1:{server.grpc_port}", await runner_for(w, w.agent, other))
    await relay.start()

    async def heard(event: pb.Event) -> None:
        del event

    scout = await relay.bind(str(w.agent.account_id), heard)
    second = await relay.bind(str(other.account_id), heard)
    yield Two(
        relay,
        scout.session_id,
        {t.name: t for t in comms_tools(relay.caller(scout.session_id))},
        {t.name: t for t in comms_tools(relay.caller(second.session_id))},
        w,
    )
    await relay.close()


def frame_bytes(session_id: str, request: gw.CommsCallRequest) -> int:
    call = gw.RelayCommsCallRequest(session_id=session_id, call_id="c1", call=request)
    return gw.RunnerFrame(call=call).ByteSize()


async def test_a_call_over_the_servers_request_limit_is_refused_unsent(two: Two) -> None:
    channel = str(two.w.channel.channel_id)
    with pytest.raises(ToolError) as failed:
        await two.scout["comms_post_message"].handler(
            {"channel_id": channel, "text": "x" * (9 << 20)}
        )
    assert str(failed.value).startswith("comms_post_message failed: resource_exhausted: ")
    assert "the limit is 8388608" in str(failed.value)
    # The stream never dropped: the other agent's call goes through on it.
    listed = await two.other["comms_list_channels"].handler({})
    assert f"{channel} #general" in listed
    assert two.relay.connections == 1


async def test_the_limit_is_the_servers(two: Two) -> None:
    """A frame just under the limit reaches the server (which refuses its
    text); just over, it is refused here. Either way the stream stays."""
    channel = str(two.w.channel.channel_id)

    def post(n: int) -> gw.CommsCallRequest:
        text = pb.MessageBlock(text=pb.TextBlock(text="x" * n))
        return gw.CommsCallRequest(
            post_message=pb.PostMessageRequest(channel_id=channel, blocks=[text])
        )

    limit = relay_module.MAX_CALL_FRAME_BYTES
    # The call id the relay mints grows by a digit now and then: a few bytes' slack.
    overhead = frame_bytes(two.session_id, post(limit - 200)) - (limit - 200)
    under = limit - 8 - overhead
    assert limit - 16 < frame_bytes(two.session_id, post(under)) <= limit - 8
    at = await two.relay.call(two.session_id, post(under))
    assert at.WhichOneof("result") == "error" and at.error.code == "invalid_argument"
    with pytest.raises(RelayError) as over:
        await two.relay.call(two.session_id, post(under + 16))
    assert over.value.code == "resource_exhausted"
    assert two.relay.connections == 1
