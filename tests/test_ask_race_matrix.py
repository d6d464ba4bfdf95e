"""All five endings race: random pairs and triples of an answer, a decline,
the agent's withdraw, the owner's withdraw and the expiry, across gRPC, both
Connect codecs and the relay, run side by side on one server. Exactly one
ending wins each ask; every loser hears already_exists naming the winner; an
ask_answer exists only for an answer; every ending reaches the agent's lane
exactly once."""

from __future__ import annotations

import asyncio
import collections
import dataclasses
import datetime
import os
import random
from collections.abc import Awaitable, Callable
from typing import Any

import pytest

from compass.v1 import agent_gateway_pb2 as gw
from compass.v1 import comms_pb2 as pb
from compass_server.store.types import Ask, AskAnswerBlock, EndingKind, PresenceState
from tests.relay_client import RelayClient, relay, runner_for
from tests.servers import CallError, ConnectClient, GrpcClient
from tests.test_faults import invariants
from tests.world import World, two_question_ask

TRIALS = 520
# Between the deadlines of successive trials that may expire.
STAGGER = datetime.timedelta(milliseconds=10)
KINDS = ("answer", "decline", "cancel", "withdraw", "expire")
WON_AS = {
    "answer": EndingKind.ANSWERED,
    "decline": EndingKind.DECLINED,
    "cancel": EndingKind.WITHDRAWN_BY_AGENT,
    "withdraw": EndingKind.WITHDRAWN_BY_OWNER,
    "expire": EndingKind.EXPIRED,
}
SAID = {
    EndingKind.ANSWERED: "already answered",
    EndingKind.DECLINED: "already declined",
    EndingKind.WITHDRAWN_BY_AGENT: "already withdrawn",
    EndingKind.WITHDRAWN_BY_OWNER: "already withdrawn by its agent's owner",
    EndingKind.EXPIRED: "already expired",
}
WITHDRAWN = (EndingKind.WITHDRAWN_BY_AGENT, EndingKind.WITHDRAWN_BY_OWNER)
ANSWERS = [
    pb.AskQuestionAnswer(question_id="db", chosen_option_ids=["pg"]),
    pb.AskQuestionAnswer(question_id="langs", chosen_option_ids=["py"]),
]


@dataclasses.dataclass
class Trial:
    contenders: list[str]
    ask_id: str = ""
    deadline: datetime.datetime | None = None
    # Per contender but the expiry: "won", or the already_exists message it got.
    outcomes: dict[str, str] = dataclasses.field(default_factory=dict)


@pytest.mark.timeout(240)
async def test_five_endings_race_and_exactly_one_wins(server: Any, api_world: World) -> None:
    w = api_world
    store = server.store
    seed = int(os.environ.get("COMPASS_RACE_SEED", random.randrange(2**32)))
    rng = random.Random(seed)
    await store.add_channel_member(w.human, w.channel.channel_id, w.other_human.account_id)
    people = [w.human, w.other_human]
    trials = [Trial(rng.sample(KINDS, rng.choice((2, 3)))) for _ in range(TRIALS)]

    callers: list[Any] = [
        GrpcClient(server.grpc_port),
        ConnectClient(server.http_port, "json"),
        ConnectClient(server.http_port, "proto"),
    ]
    async with relay(server.grpc_port, await runner_for(w)) as r:
        await r.bound("scout", w.agent)
        deliveries: list[pb.Event] = []
        lane = asyncio.ensure_future(collect(r, deliveries))
        try:
            # An ask that may expire falls due when its trial's calls fire, each
            # a little after the one before, so the expiry loop wakes for it then.
            await post_all(store, w, [t for t in trials if "expire" not in t.contenders])
            # Room for posting them all on a loaded machine before the first is due.
            first = datetime.datetime.now(datetime.UTC) + datetime.timedelta(seconds=4)
            due = [t for t in trials if "expire" in t.contenders]
            for i, t in enumerate(due):
                t.deadline = first + i * STAGGER
            await post_all(store, w, due)

            def contender(t: Trial, kind: str) -> Callable[[], Awaitable[Any]]:
                client = rng.choice(callers)
                person = rng.choice(people)
                token = w.tokens[person.account_id]
                if kind == "answer":
                    req: Any = pb.RespondToAskRequest(ask_id=t.ask_id, answers=ANSWERS)
                    return lambda: client.call("RespondToAsk", req, token)
                if kind == "decline":
                    req = pb.DeclineAskRequest(ask_id=t.ask_id, reason=f"no ({client.name})")
                    return lambda: client.call("DeclineAsk", req, token)
                if kind == "withdraw":
                    req = pb.WithdrawAskRequest(ask_id=t.ask_id)
                    return lambda: client.call("WithdrawAsk", req, w.tokens[w.human.account_id])
                if kind == "cancel":
                    req = gw.CancelAskRequest(ask_id=t.ask_id)
                    return lambda: relay_call(r, req)
                # In process it beats any call over a transport: give the calls a start.
                lag = rng.uniform(0, 0.004)

                async def sweep() -> int:
                    await asyncio.sleep(lag)
                    return await store.expire_due_asks(1)  # type: ignore[no-any-return]

                return sweep

            async def run(t: Trial) -> None:
                if t.deadline is not None:
                    now = datetime.datetime.now(datetime.UTC)
                    await asyncio.sleep((t.deadline - now).total_seconds())
                calls = [contender(t, kind) for kind in t.contenders]
                results = await asyncio.gather(*(c() for c in calls), return_exceptions=True)
                for kind, result in zip(t.contenders, results, strict=True):
                    if kind == "expire":
                        assert isinstance(result, int), result
                    elif isinstance(result, CallError):
                        assert result.code == "already_exists", (kind, result)
                        t.outcomes[kind] = result.message
                    else:
                        assert not isinstance(result, BaseException), (kind, result)
                        t.outcomes[kind] = "won"

            await asyncio.gather(*(run(t) for t in trials))

            asks, answer_counts = await final_state(w)
            wins: collections.Counter[str] = collections.Counter()
            for t in trials:
                ask = asks[t.ask_id]
                assert ask.ending is not None, t
                winners = [k for k, o in t.outcomes.items() if o == "won"]
                if ask.ending.kind is EndingKind.EXPIRED:
                    assert winners == [] and "expire" in t.contenders, t
                    winner = "expire"
                else:
                    assert len(winners) == 1, t
                    winner = winners[0]
                    assert ask.ending.kind is WON_AS[winner], t
                wins[winner] += 1
                for kind, outcome in t.outcomes.items():
                    if kind != winner:
                        assert outcome.endswith(SAID[ask.ending.kind]), (t, kind)
                assert ask.answered == (ask.ending.kind is EndingKind.ANSWERED)
                assert ask.cancelled == (
                    ask.ending.kind
                    in (EndingKind.WITHDRAWN_BY_AGENT, EndingKind.WITHDRAWN_BY_OWNER)
                )
                assert all(q.timed_out for q in ask.questions) == (
                    ask.ending.kind is EndingKind.EXPIRED
                )
                assert answer_counts[t.ask_id] == (1 if ask.answered else 0), t
            with_expiry = collections.Counter(
                "expire" if asks[t.ask_id].ending.kind is EndingKind.EXPIRED else "other"  # type: ignore[union-attr]
                for t in due
            )
            print(f"race matrix seed={seed} winners={dict(wins)} expiry trials={dict(with_expiry)}")
            assert set(wins) == set(KINDS), (seed, wins)

            # Every ending by someone else reaches the agent's lane once: an
            # answer as its answer message, any other as the ask's update. The
            # agent's own withdrawal came back with its call instead.
            told = {
                a
                for a, ask in asks.items()
                if ask.ending is not None
                and ask.ending.kind not in (EndingKind.ANSWERED, EndingKind.WITHDRAWN_BY_AGENT)
            }
            await until_delivered(deliveries, told)
            await asyncio.sleep(0.5)
            ended: collections.Counter[str] = collections.Counter()
            answered: collections.Counter[str] = collections.Counter()
            for event in deliveries:
                if event.HasField("message_updated"):
                    for b in event.message_updated.message.blocks:
                        if b.HasField("ask") and b.ask.HasField("ending"):
                            ended[b.ask.ask_id] += 1
                elif event.HasField("message_posted"):
                    for b in event.message_posted.message.blocks:
                        if b.HasField("ask_answer"):
                            answered[b.ask_answer.ask_id] += 1
            assert ended == {a: 1 for a in told}
            assert answered == {a: 1 for a, ask in asks.items() if ask.answered}
        finally:
            lane.cancel()
            for c in callers:
                await c.close()
    (presence,) = await store.get_presence(w.human, [w.agent.account_id])
    assert presence.state is not PresenceState.WAITING
    await invariants(server.database_url, w.workspace_id)


async def relay_call(r: RelayClient, req: gw.CancelAskRequest) -> Any:
    result = await r.call("scout", "cancel_ask", req)
    if result.HasField("error"):
        raise CallError(result.error.code, result.error.message)
    return result.cancel_ask


async def post_all(store: Any, w: World, trials: list[Trial]) -> None:
    slots = asyncio.Semaphore(16)

    async def post(t: Trial) -> None:
        ask = dataclasses.replace(two_question_ask(), deadline=t.deadline)
        async with slots:
            message = await store.append_message(w.agent, w.channel.channel_id, [ask])
        t.ask_id = message.blocks[0].ask_id

    await asyncio.gather(*(post(t) for t in trials))


async def collect(r: RelayClient, into: list[pb.Event]) -> None:
    while True:
        event = await r.deliveries["scout"].get()
        into.append(event)
        await r.ack("scout", event.event_id)


async def until_delivered(deliveries: list[pb.Event], ask_ids: set[str]) -> None:
    give_up = asyncio.get_running_loop().time() + 30
    while True:
        seen = {
            b.ask.ask_id
            for e in deliveries
            if e.HasField("message_updated")
            for b in e.message_updated.message.blocks
            if b.HasField("ask") and b.ask.HasField("ending")
        }
        if ask_ids <= seen:
            return
        assert asyncio.get_running_loop().time() < give_up, len(ask_ids - seen)
        await asyncio.sleep(0.1)


async def final_state(w: World) -> tuple[dict[str, Ask], collections.Counter[str]]:
    asks: dict[str, Ask] = {}
    answers: collections.Counter[str] = collections.Counter()
    token = ""
    while True:
        page = await w.store.list_messages(w.human, w.channel.channel_id, 200, token)
        for m in page.items:
            for b in m.blocks:
                if isinstance(b, Ask):
                    asks[b.ask_id] = b
                elif isinstance(b, AskAnswerBlock):
                    answers[b.ask_id] += 1
        token = page.next_page_token
        if not token:
            return asks, answers
