"""Follow-ups by mail: a named answerer gets a reminder in the ask's thread,
and an escalation reaches a person the ask never mailed, marked urgent, with
a link that lets them answer."""

from __future__ import annotations

import asyncio
import dataclasses
import datetime

import httpx
import pytest

from compass_server.store.types import Ask, EndingKind, FollowUp
from tests.mailbox import Mailbox, parts
from tests.servers import GrpcClient
from tests.test_email import (  # noqa: F401 (fixtures)
    email_endpoint,
    links,
    mail_of,
    mailbox,
    mailing,
    rpc,
    ship_it,
    w,
)
from tests.world import World

pytestmark = pytest.mark.timeout(120)

S = datetime.timedelta(seconds=1)


async def test_a_reminder_in_the_thread_and_an_escalation_to_a_new_person(
    rpc: GrpcClient,  # noqa: F811
    mailbox: Mailbox,  # noqa: F811
    w: World,  # noqa: F811
) -> None:
    await email_endpoint(rpc, w)
    await w.store.add_channel_member(w.human, w.channel.channel_id, w.other_human.account_id)
    ada, grace = mail_of(w, w.human), mail_of(w, w.other_human)
    ask = dataclasses.replace(
        ship_it(w.human),
        follow_up=FollowUp(
            remind_after=0.5 * S,
            remind_times=1,
            escalate_after=1.5 * S,
            escalate_to=(w.other_human.account_id,),
        ),
    )
    posted = await w.post_ask(w.agent, ask)
    block = posted.blocks[0]
    assert isinstance(block, Ask)
    ask_id = block.ask_id

    first, reminder = await mailbox.wait_for(ada, 2)
    assert reminder["Subject"] == "Re: scout asks: Release"
    assert reminder["In-Reply-To"] == first["Message-ID"]
    assert reminder["Message-ID"] not in (first["Message-ID"], None)
    text, _ = parts(reminder)
    assert "Reminder: scout is still waiting for your answer in #" in text
    assert links(text), text
    # Not named: nothing for grace yet.
    assert mailbox.to(grace) == []

    [escalation] = await mailbox.wait_for(grace, 1)
    assert escalation["Subject"] == "Urgent: scout asks: Release"
    assert escalation["Importance"] == "high"
    text, html = parts(escalation)
    assert "Nobody has answered yet, so scout asks you too in #" in text
    assert "asks you too" in html
    plain = links(text)[-1]
    # The escalation reached grace alone: ada's thread holds two mails.
    await asyncio.sleep(0.5)
    assert len(mailbox.to(ada)) == 2 and len(mailbox.to(grace)) == 1

    # Grace's own link answers the ask, which named only ada at its post.
    async with httpx.AsyncClient() as http:
        done = await http.post(
            plain,
            json={
                "askId": ask_id,
                "action": "answer",
                "answers": [{"questionId": "go", "chosenOptionIds": ["y"]}],
            },
        )
        assert done.status_code == 200, done.text
    _, ended = await w.store.get_ask(w.human, ask_id)
    assert ended.ending is not None and ended.ending.kind is EndingKind.ANSWERED
    assert ended.ending.actor_id == w.other_human.account_id
    assert [s.kind for s in ended.follow_up_steps] == ["reminded", "escalated"]
