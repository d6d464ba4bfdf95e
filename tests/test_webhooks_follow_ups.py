"""Follow-up steps on webhooks: each reminder and the escalation of an open
ask is one delivery (ask.reminded, ask.escalated) carrying the step, between
the posting and the ending."""

from __future__ import annotations

import dataclasses
import datetime

import pytest

from compass_server.store.types import Answer, FollowUp
from tests.receiver import Receiver
from tests.servers import GrpcClient
from tests.test_webhooks import (  # noqa: F401
    create,
    hooks,
    receiver,
    rpc,
    verified,
    w,
)
from tests.world import World, two_question_ask

pytestmark = pytest.mark.timeout(120)

S = datetime.timedelta(seconds=1)
PG = [Answer("db", ("pg",)), Answer("langs", ("py",))]


async def test_each_step_is_a_delivery_with_the_step(
    rpc: GrpcClient,  # noqa: F811
    receiver: Receiver,  # noqa: F811
    w: World,  # noqa: F811
) -> None:
    made = await create(rpc, w, receiver.url())
    await w.store.add_channel_member(w.human, w.channel.channel_id, w.other_human.account_id)
    ask = dataclasses.replace(
        two_question_ask(),
        answerer_ids=(w.human.account_id,),
        follow_up=FollowUp(
            remind_after=0.3 * S,
            remind_times=1,
            escalate_after=0.8 * S,
            escalate_to=(w.other_human.account_id,),
        ),
    )
    (posted,) = (await w.post_ask(w.agent, ask)).blocks
    got = [verified(made.secret, r) for r in await receiver.wait_for(3)]
    await w.store.answer_ask(w.other_human, posted.ask_id, PG)  # type: ignore[union-attr]
    got = [verified(made.secret, r) for r in await receiver.wait_for(4)]
    seen = sorted(got, key=lambda p: p["data"]["sequence"])
    assert [p["type"] for p in seen] == [
        "ask.posted",
        "ask.reminded",
        "ask.escalated",
        "ask.answered",
    ]
    reminded, escalated = (p["data"]["follow_up"] for p in seen[1:3])
    assert reminded["kind"] == "reminded" and reminded["number"] == 1
    assert not reminded["urgent"]
    assert reminded["people"] == [{"account_id": str(w.human.account_id), "handle": "ada"}]
    assert escalated["kind"] == "escalated" and escalated["number"] == 2
    assert escalated["urgent"]
    assert escalated["people"] == [{"account_id": str(w.other_human.account_id), "handle": "grace"}]
    assert seen[2]["data"]["ask"]["state"] == "open"
    assert seen[3]["data"]["ask"]["ending"]["by"]["handle"] == "grace"
