"""Two `compass-server serve` processes on one PostgreSQL behave as one."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Iterator
from typing import Any

import pytest

from compass.v1 import comms_pb2 as pb
from tests.procs import ServerProcess
from tests.servers import CallError, GrpcClient
from tests.world import World

pytestmark = pytest.mark.timeout(300)


@pytest.fixture
async def clients(
    two_servers: tuple[ServerProcess, ServerProcess],
) -> AsyncIterator[tuple[GrpcClient, GrpcClient]]:
    a, b = (GrpcClient(s.grpc_port) for s in two_servers)
    yield a, b
    await a.close()
    await b.close()


def ask_block(question: str = "Go?") -> pb.MessageBlock:
    return pb.MessageBlock(
        ask=pb.Ask(
            questions=[
                pb.AskQuestion(
                    question_id="q", question=question, options=[pb.AskOption(id="y", label="Yes")]
                )
            ]
        )
    )


async def test_a_subscriber_on_one_server_gets_every_change_made_through_another_in_order(
    world: World, clients: tuple[GrpcClient, GrpcClient]
) -> None:
    a, b = clients
    human, agent = world.tokens[world.human.account_id], world.tokens[world.agent.account_id]
    stream = a.stream("Subscribe", pb.SubscribeRequest(), human)
    ready = await asyncio.wait_for(anext(stream), 10)
    assert ready.WhichOneof("kind") == "ready"
    channel = str(world.channel.channel_id)

    async def post(client: GrpcClient, i: int) -> None:
        await client.call(
            "PostMessage",
            pb.PostMessageRequest(
                channel_id=channel, blocks=[pb.MessageBlock(text=pb.TextBlock(text=f"m{i}"))]
            ),
            agent,
        )

    await asyncio.gather(*(post(b if i % 2 else a, i) for i in range(60)))
    got = [await asyncio.wait_for(anext(stream), 10) for _ in range(60)]
    ids = [e.event_id for e in got]
    assert ids == list(range(ready.event_id + 1, ready.event_id + 61))
    assert sorted(e.message_posted.message.blocks[0].text.text for e in got) == sorted(
        f"m{i}" for i in range(60)
    )
    await stream.aclose()  # type: ignore[attr-defined]


async def test_concurrent_answers_through_two_servers_have_one_winner(
    world: World, clients: tuple[GrpcClient, GrpcClient]
) -> None:
    a, b = clients
    human, agent = world.tokens[world.human.account_id], world.tokens[world.agent.account_id]
    channel = str(world.channel.channel_id)
    for _ in range(40):
        posted = await a.call(
            "PostMessage", pb.PostMessageRequest(channel_id=channel, blocks=[ask_block()]), agent
        )
        ask_id = posted.message.blocks[0].ask.ask_id
        req = pb.RespondToAskRequest(
            ask_id=ask_id, answers=[pb.AskQuestionAnswer(question_id="q", chosen_option_ids=["y"])]
        )
        results: list[Any] = await asyncio.gather(
            a.call("RespondToAsk", req, human),
            b.call("RespondToAsk", req, human),
            return_exceptions=True,
        )
        errors = [r for r in results if isinstance(r, BaseException)]
        assert len(errors) == 1 and isinstance(errors[0], CallError), results
        assert errors[0].code == "already_exists"


async def test_answer_on_one_server_and_cancel_through_the_relay_of_another_have_one_winner(
    world: World,
    clients: tuple[GrpcClient, GrpcClient],
    two_servers: tuple[ServerProcess, ServerProcess],
    database_url: str,
) -> None:
    from compass.v1 import agent_gateway_pb2 as gw
    from tests.relay_client import relay, runner_for
    from tests.test_faults import invariants

    a, _ = clients
    human = world.tokens[world.human.account_id]
    channel = str(world.channel.channel_id)
    token = await runner_for(world, world.agent)
    async with relay(two_servers[1].grpc_port, token) as runner:
        await runner.bound("s1", world.agent)
        outcomes = {"answered": 0, "cancelled": 0}
        for _ in range(200):
            posted = await runner.ok(
                "s1", "post_ask", gw.PostAskRequest(channel_id=channel, ask=ask_block().ask)
            )
            ask_id = posted.ask_id
            answer = a.call(
                "RespondToAsk",
                pb.RespondToAskRequest(
                    ask_id=ask_id,
                    answers=[pb.AskQuestionAnswer(question_id="q", chosen_option_ids=["y"])],
                ),
                human,
            )
            cancel = runner.call("s1", "cancel_ask", gw.CancelAskRequest(ask_id=ask_id))
            answered, cancelled = await asyncio.gather(answer, cancel, return_exceptions=True)
            answer_won = not isinstance(answered, BaseException)
            cancel_won = cancelled.WhichOneof("result") == "cancel_ask"  # type: ignore[union-attr]
            assert answer_won != cancel_won, (answered, cancelled)
            if answer_won:
                assert cancelled.error.code == "already_exists"  # type: ignore[union-attr]
            else:
                assert isinstance(answered, CallError) and answered.code == "already_exists"
            final = await world.store._ask_state(world.human, ask_id)
            assert final.answered == answer_won and final.cancelled == cancel_won
            outcomes["answered" if answer_won else "cancelled"] += 1
    assert sum(outcomes.values()) == 200
    await invariants(database_url, world.workspace_id)


@pytest.fixture
def four_servers(database_url: str) -> Iterator[list[ServerProcess]]:
    servers = [ServerProcess(database_url).start() for _ in range(4)]
    yield servers
    for s in servers:
        if s.proc is not None:
            assert s.stop() == 0, "".join(s.log)


class Lane:
    """An agent bound through one runner on one server; every event it hears,
    acked as it comes."""

    def __init__(self, pair: World, token: str) -> None:
        self.pair = pair
        self.token = token
        self.heard: list[pb.Event] = []
        self.runner: Any = None
        self.server = -1
        self.asked = 0

    async def connect(self, servers: list[ServerProcess], index: int) -> None:
        from tests.relay_client import RelayClient

        self.server = index
        self.runner = RelayClient.grpc(servers[index].grpc_port, self.token)
        await self.runner.bound("s", self.pair.agent)

    async def ask(self) -> str:
        from compass.v1 import agent_gateway_pb2 as gw

        self.asked += 1
        # Asks alike from one agent in one channel are one ask (posting once).
        block = ask_block(f"Go, for the {self.asked}th time?")
        posted = await self.runner.ok(
            "s",
            "post_ask",
            gw.PostAskRequest(channel_id=str(self.pair.channel.channel_id), ask=block.ask),
        )
        return str(posted.ask_id)

    async def hear(self, count: int) -> None:
        for _ in range(count):
            event = await self.runner.delivery("s", 30)
            self.heard.append(event)
            await self.runner.ack("s", event.event_id)
        # A call's result comes after every ack before it is stored.
        await self.runner.ok("s", "list_channels", pb.ListChannelsRequest())

    def answered(self) -> list[str]:
        return [
            e.message_posted.message.blocks[0].ask_answer.ask_id
            for e in self.heard
            if e.WhichOneof("kind") == "message_posted"
            and e.message_posted.message.blocks[0].WhichOneof("block") == "ask_answer"
        ]


async def test_four_servers_answers_cross_processes_and_a_killed_ones_runners_move_losing_nothing(
    world: World, four_servers: list[ServerProcess]
) -> None:
    from tests.relay_client import runner_for

    servers = four_servers
    clients = [GrpcClient(s.grpc_port) for s in servers]
    lanes: list[Lane] = []
    for i in range(12):
        pair = await world.add_pair()
        lane = Lane(pair, await runner_for(pair, pair.agent))
        await lane.connect(servers, i % 4)
        lanes.append(lane)

    async def answer(lane: Lane, ask_id: str, through: int) -> None:
        human = lane.pair.tokens[lane.pair.human.account_id]
        await clients[through].call(
            "RespondToAsk",
            pb.RespondToAskRequest(
                ask_id=ask_id,
                answers=[pb.AskQuestionAnswer(question_id="q", chosen_option_ids=["y"])],
            ),
            human,
        )

    try:
        # Each answer is given on a process other than the one holding the agent.
        first = [await lane.ask() for lane in lanes]
        await asyncio.gather(
            *(answer(lane, a, (lane.server + 1) % 4) for lane, a in zip(lanes, first, strict=True))
        )
        await asyncio.gather(*(lane.hear(1) for lane in lanes))
        assert [lane.answered() for lane in lanes] == [[a] for a in first]
        # Asks left open, then the process holding a quarter of the runners dies.
        second = [await lane.ask() for lane in lanes]
        servers[0].kill9()
        moved = [lane for lane in lanes if lane.server == 0]
        for lane in moved:
            with contextlib.suppress(Exception):
                await lane.runner.close()
        # Answers given while those runners are away, on the survivors.
        await asyncio.gather(
            *(
                answer(lane, a, 1 + (i % 3))
                for i, (lane, a) in enumerate(zip(lanes, second, strict=True))
            )
        )
        for i, lane in enumerate(moved):
            await lane.connect(servers, 1 + (i % 3))
        await asyncio.gather(*(lane.hear(1) for lane in lanes))
        for lane, a, b in zip(lanes, first, second, strict=True):
            assert lane.answered() == [a, b]
            ids = [e.event_id for e in lane.heard]
            assert len(ids) == len(set(ids)), ids
        for lane in lanes:
            await lane.runner.no_delivery("s", 0.5)
    finally:
        for lane in lanes:
            with contextlib.suppress(Exception):
                await lane.runner.close()
        for c in clients:
            await c.close()
