"""The agent kit spawns a sub-agent and binds it in one step (Runner.spawn,
through compass_agentkit.subagents), against the real server: the sub-agent
asks in its parent's channel under its own name and hears that channel on
its own lane."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from compass.v1 import comms_pb2 as pb
from compass_agentkit.relay import Relay
from compass_agentkit.runner import AgentLane, Runner
from compass_agentkit.tools import ToolError
from tests.relay_client import runner_for
from tests.servers import GrpcClient
from tests.world import World


async def test_a_runner_spawns_a_subagent_that_asks_and_hears_in_its_parents_channel(
    server: Any, api_world: World
) -> None:
    w = api_world
    heard: dict[str, asyncio.Queue[pb.Event]] = {}

    async def callback(lane: AgentLane, event: pb.Event) -> None:
        heard.setdefault(lane.session.agent_id, asyncio.Queue()).put_nowait(event)

    relay = Relay(f"127.0.0.1:{server.grpc_port}", await runner_for(w, w.agent))
    await relay.start()
    grpc = GrpcClient(server.grpc_port)
    ada = w.tokens[w.human.account_id]
    try:
        runner = Runner(relay, [str(w.agent.account_id)], callback)
        [scout] = await runner.bind_all()
        planner = await runner.spawn(scout, "planner")
        planner_id = planner.session.agent_id
        assert planner_id != str(w.agent.account_id)
        assert set(runner.lanes) == {scout.session.session_id, planner.session.session_id}

        posted = await planner.tools["comms_post_ask"].send(
            {
                "channel_id": str(w.channel.channel_id),
                "questions": [{"id": "go", "question": "Ship it?", "options": []}],
            }
        )
        got = await grpc.call(
            "GetMessage", pb.GetMessageRequest(message_id=posted.message.message_id), ada
        )
        assert got.message.author_account_id == planner_id
        accounts = await grpc.call(
            "GetAccounts", pb.GetAccountsRequest(account_ids=[planner_id]), ada
        )
        assert accounts.accounts[0].parent_account_id == str(w.agent.account_id)

        # ada writes in scout's channel: the sub-agent hears it on its own lane.
        await w.post_text(w.human, "planner, go ahead")
        queue = heard.setdefault(planner_id, asyncio.Queue())
        async with asyncio.timeout(10):
            while True:
                event = await queue.get()
                if event.WhichOneof("kind") == "message_posted":
                    break
        assert event.message_posted.message.blocks[0].text.text == "planner, go ahead"

        # A taken handle: the hub's refusal, and nothing more is bound.
        with pytest.raises(ToolError) as taken:
            await runner.spawn(scout, "planner")
        assert taken.value.code == "already_exists"
        assert len(runner.lanes) == 2
    finally:
        await relay.close()
        await grpc.close()
