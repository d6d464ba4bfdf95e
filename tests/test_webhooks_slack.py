"""Slack endpoints: an ask arrives as a Block Kit card (its questions, its
options, a button to the page) and its ending as a follow-up ("Answered by
ada", "Withdrawn by scout", "Declined by ada: …", "Expired"). Every message
is checked against Block Kit's documented shape with Slack's own SDK models:
each block parses, validates (lengths, counts) and round-trips unchanged."""

from __future__ import annotations

import datetime
import json
from typing import Any

import pytest
from slack_sdk.models.blocks import Block

from compass.v1 import admin_pb2 as ad
from compass_server.store.types import Answer, Ask, AskOption, AskQuestion
from tests.receiver import Received, Receiver
from tests.servers import GrpcClient
from tests.test_ask_expiry import fresh_database_url  # noqa: F401  (fixture)

# The fixtures are used by name; ruff reads each test's parameter as redefining them.
from tests.test_webhooks import (  # noqa: F401
    PUBLIC_URL,
    ask_id_of,
    create,
    hooks,
    receiver,
    rpc,
    w,
    yes_no,
)
from tests.world import World

pytestmark = pytest.mark.timeout(120)

MAX_BLOCKS = 50


def slack_message(r: Received) -> dict[str, Any]:
    """The message, once Slack's models accept every block of it unchanged."""
    message = json.loads(r.body)
    assert set(message) == {"text", "blocks"}
    assert isinstance(message["text"], str) and 0 < len(message["text"]) <= 3000
    assert 0 < len(message["blocks"]) <= MAX_BLOCKS
    for raw in message["blocks"]:
        block = Block.parse(raw)
        assert block is not None, raw
        block.validate_json()
        assert block.to_dict() == raw
    return message  # type: ignore[no-any-return]


def texts(message: dict[str, Any]) -> list[str]:
    out = []
    for b in message["blocks"]:
        if b["type"] == "section":
            out.append(b["text"]["text"])
        elif b["type"] == "context":
            out.extend(e["text"] for e in b["elements"])
    return out


def buttons(message: dict[str, Any]) -> list[dict[str, Any]]:
    return [e for b in message["blocks"] if b["type"] == "actions" for e in b["elements"]]


async def test_an_ask_is_a_card_and_each_ending_a_follow_up(
    rpc: GrpcClient,  # noqa: F811
    receiver: Receiver,  # noqa: F811
    w: World,  # noqa: F811
) -> None:
    await create(rpc, w, receiver.url("/services/T1/B1/abc"), kind=ad.WEBHOOK_KIND_SLACK)
    due = datetime.datetime.now(datetime.UTC) + datetime.timedelta(seconds=0.6)
    named = Ask(questions=yes_no().questions, deadline=due, answerer_ids=(w.human.account_id,))
    answered = await w.post_ask()
    declined = await w.post_ask(w.agent, yes_no())
    by_agent = await w.post_ask(w.agent, yes_no())
    by_owner = await w.post_ask(w.agent, yes_no())
    await w.post_ask(w.agent, named)
    store = w.store
    await store.answer_ask(
        w.human, ask_id_of(answered), [Answer("db", ("pg",)), Answer("langs", (), "only Rust")]
    )
    await store.decline_ask(w.human, ask_id_of(declined), "not now")
    await store.cancel_ask(w.agent, ask_id_of(by_agent))
    await store.withdraw_ask(w.human, ask_id_of(by_owner))
    got = [slack_message(r) for r in await receiver.wait_for(10)]

    cards = [m for m in got if buttons(m)]
    follow_ups = [m for m in got if not buttons(m)]
    assert len(cards) == 5 and len(follow_ups) == 5
    card = next(m for m in cards if ask_id_of(answered) in json.dumps(m))
    assert card["text"] == "scout asks in #general: Which database?"
    head, db, langs = texts(card)[:3]
    assert head == "*scout* asks in *#general*"
    assert db.splitlines() == [
        "*Storage* · Which database?",
        "• PostgreSQL _(recommended)_",
        "• MySQL",
    ]
    assert langs.splitlines()[-1] == "_Choose any that apply._"
    (button,) = buttons(card)
    assert button["url"] == f"{PUBLIC_URL}/#/ask/{ask_id_of(answered)}"
    assert button["text"]["text"] == "Answer in Compass"
    deadline_card = next(m for m in cards if "Only ada may answer." in texts(m)[0])
    assert "It expires <!date^" in texts(deadline_card)[0]

    said = sorted(m["text"].split(":")[0] for m in follow_ups)
    assert said == [
        "Answered by ada",
        "Declined by ada",
        "Expired",
        "Withdrawn by ada, the owner of scout",
        "Withdrawn by scout",
    ]
    answer = next(m for m in follow_ups if m["text"].startswith("Answered"))
    assert texts(answer)[0].splitlines() == [
        "*Answered by ada*",
        "Which database? → PostgreSQL",
        "Which languages? → “only Rust”",
    ]
    assert f"<{PUBLIC_URL}/#/ask/{ask_id_of(answered)}|Open in Compass>" in texts(answer)[1]
    no = next(m for m in follow_ups if m["text"].startswith("Declined"))
    assert texts(no)[0] == "*Declined by ada: not now*"


async def test_an_inbox_item_is_a_card_too(
    hooks: Any,  # noqa: F811
    rpc: GrpcClient,  # noqa: F811
    receiver: Receiver,  # noqa: F811
    w: World,  # noqa: F811
) -> None:
    await create(rpc, w, receiver.url(), kind=ad.WEBHOOK_KIND_SLACK)
    item, _ = await hooks.inbox.post(w.agent, "deploy", "Deploy?", "Shall I?", yes_no())
    await hooks.inbox.close(w.human, item.item_id)
    got = sorted(
        (slack_message(r) for r in await receiver.wait_for(2)), key=lambda m: not buttons(m)
    )
    card, closed = got
    assert texts(card)[0] == "*scout* asks in its inbox: *Deploy?*"
    assert buttons(card)[0]["url"] == f"{PUBLIC_URL}/#/inbox/{item.item_id}"
    assert texts(closed)[0] == "*Closed by ada*"


async def test_a_huge_or_hostile_ask_still_makes_a_valid_card(
    rpc: GrpcClient,  # noqa: F811
    receiver: Receiver,  # noqa: F811
    w: World,  # noqa: F811
) -> None:
    await create(rpc, w, receiver.url(), kind=ad.WEBHOOK_KIND_SLACK)
    big = Ask(
        questions=tuple(
            AskQuestion(
                question_id=f"q{i}",
                question="<!channel> & <https://evil.example|click> " + "why " * 480,
                header="h" * 100,
                options=tuple(
                    AskOption(f"o{j}", "label " * 16, "described " * 30)
                    for j in range(50 if i == 0 else 2)
                ),
            )
            for i in range(20)
        )
    )
    await w.post_ask(w.agent, big)
    (card,) = [slack_message(r) for r in await receiver.wait_for(1)]
    assert len(card["blocks"]) == 23
    first = texts(card)[1]
    # Markup a person typed shows as typed: no @channel ping, no disguised link.
    assert first.startswith("*hhhh")
    assert "&lt;!channel&gt; &amp; &lt;https://evil.example|click&gt;" in first
    assert "<!channel>" not in json.dumps(card)
    assert "_…and 40 more_" in first or first.endswith("…")


async def test_a_slack_url_never_reaches_the_log(
    fresh_database_url: str,  # noqa: F811
    receiver: Receiver,  # noqa: F811
) -> None:
    """A Slack endpoint's URL is itself its secret (it is stored sealed): the
    server's log never holds it, not even at DEBUG, through every attempt."""
    from compass_server.store.vault import new_key
    from tests.procs import ServerProcess
    from tests.test_ask_expiry import open_world

    secret = "T0SECRET/B0SECRET/xoxb1a2b3c4d5e6f"
    db, world = await open_world(fresh_database_url)
    server = ServerProcess(
        fresh_database_url,
        env={
            "COMPASS_LOG_LEVEL": "DEBUG",
            "COMPASS_WEBHOOK_KEY": new_key(),
            "COMPASS_WEBHOOK_ALLOWED_NETWORKS": "127.0.0.0/8",
            "COMPASS_WEBHOOK_POLL_SECONDS": "0.1",
        },
    ).start()
    client = GrpcClient(server.grpc_port)
    try:
        await create(client, world, receiver.url(f"/services/{secret}"), kind=ad.WEBHOOK_KIND_SLACK)
        message = await world.post_ask()
        await world.store.cancel_ask(world.agent, ask_id_of(message))
        assert len(await receiver.wait_for(2)) == 2
    finally:
        await client.close()
        assert server.stop() == 0
        await db.close()
    log = "".join(server.log)
    assert " DEBUG " in log
    assert "SECRET" not in log and "xoxb1a2b3c4d5e6f" not in log, log
