"""A harness's hook request answered where people are: on the page (in
Chromium) and in Slack (the stand-in); the person answering as the harness
times out; and Compass's database down, which falls back at once."""

from __future__ import annotations

import asyncio
import json
import uuid
from collections.abc import AsyncIterator
from typing import Any

import pytest
from playwright.async_api import expect

from compass_server.store.types import Answer, EndingKind, Operator
from tests.browser import ask_block, question, sign_in
from tests.procs import ServerProcess
from tests.slack_standin import SECRET, TOKEN, Slack, SlackStandIn, buttons, slack_server
from tests.test_faults import own_postgres  # noqa: F401  (the fixture, by name)
from tests.test_hooks import (
    ALLOWED,
    PERMISSION,
    denied,
    hook_token,
    open_asks,
    post,
    the_open_ask,
    until,
)
from tests.test_slack_app import KEY, SLACK_CHANNEL
from tests.world import World

pytestmark = pytest.mark.timeout(180)


async def test_denied_on_the_page_with_a_reason(page: Any, server: Any, api_world: World) -> None:
    w = api_world
    token = await hook_token(w)
    held = post(server, token, PERMISSION)
    ask = await the_open_ask(w)
    await sign_in(page, w.tokens[w.human.account_id])
    form = ask_block(page, ask.ask_id)
    await expect(form).to_be_visible()
    message = page.locator(".message", has=form)
    await expect(message).to_contain_text("git push --force origin main")
    await expect(message).to_contain_text("Reason: Push the rebased branch")
    decision = question(form, "decision")
    await expect(decision.locator("legend")).to_contain_text("Allow Bash: git push --force")
    await decision.get_by_label("Deny").check()
    await decision.get_by_label("Other").fill("rebase on main first")
    await form.get_by_role("button", name="Submit answers").click()
    reply = await held
    assert reply.content == denied("Denied by @ada: rebase on main first")


@pytest.fixture(scope="module")
async def standin() -> AsyncIterator[SlackStandIn]:
    s = await SlackStandIn().start()
    yield s
    await s.close()


@pytest.fixture(scope="module")
async def slack_srv(
    database_url: str, tmp_path_factory: pytest.TempPathFactory, standin: SlackStandIn
) -> AsyncIterator[Any]:
    async with slack_server(
        database_url,
        tmp_path_factory.mktemp("hooks-slack"),
        standin,
        KEY,
        webhook_concurrency=16,
        webhook_concurrency_per_endpoint=16,
    ) as s:
        yield s


async def test_allowed_with_a_click_in_slack(slack_srv: Any, standin: SlackStandIn) -> None:
    from compass.v1 import admin_pb2 as ad
    from tests.servers import GrpcClient

    w = await World.create(slack_srv.store)
    # One app per Slack team in the whole database: this test's own team.
    team = "T" + uuid.uuid4().hex[:10].upper()
    rpc = GrpcClient(slack_srv.grpc_port)
    slack = Slack(slack_srv.http_port)
    try:
        token = w.tokens[w.human.account_id]
        made = await rpc.call(
            "ConnectSlackApp",
            ad.ConnectSlackAppRequest(
                team_id=team, bot_token=TOKEN, signing_secret=SECRET, email_match=True
            ),
            token,
        )
        await rpc.call(
            "MapSlackChannel",
            ad.MapSlackChannelRequest(
                app_id=made.app.app_id,
                channel_id=str(w.channel.channel_id),
                slack_channel=SLACK_CHANNEL,
            ),
            token,
        )
        email = f"ada-{team.lower()}@example.test"
        await slack_srv.store.set_email(Operator(w.workspace_id), w.human.account_id, email)
        standin.users["U9ADA"] = {
            "id": "U9ADA",
            "team_id": team,
            "is_bot": False,
            "is_email_confirmed": True,
            "profile": {"email": email},
        }
        held = post(slack_srv, await hook_token(w), PERMISSION)
        ask = await the_open_ask(w)
        (card,) = await standin.wait(
            "chat.postMessage", where=lambda c: ask.ask_id in json.dumps(c.body)
        )
        shown = buttons(card.body)
        assert [b["text"]["text"] for b in shown][:3] == [
            "Allow",
            "Always allow this rule",
            "Deny",
        ]
        click = slack.click("U9ADA", shown[0], SLACK_CHANNEL)
        click["team"]["id"] = click["user"]["team_id"] = team
        await slack.send(click)
        reply = await held
        assert reply.content == ALLOWED
    finally:
        await slack.close()
        await rpc.close()


TRIALS = 20


async def _all(w: World) -> list[Any]:
    asks = await open_asks(w)
    return asks if len(asks) >= TRIALS else []


async def test_an_answer_racing_the_harness_timeout_is_the_one_it_hears(
    server: Any, api_world: World
) -> None:
    """The request is held 1 s (6 s less the 5 s margin); a person answers
    around then. Whichever ending stands is what the harness hears."""
    w = api_world
    token = await hook_token(w)
    held = [
        post(server, token, {**PERMISSION, "session_id": f"s{i}"}, timeout="6", fallback="deny")
        for i in range(TRIALS)
    ]
    asks = await until(lambda: _all(w), "every request's ask", wait=60)
    by_session = {a.ask_id: a for a in asks}

    async def answer(ask_id: str, delay: float) -> None:
        await asyncio.sleep(delay)
        try:
            await w.store.answer(w.human, ask_id, [Answer("decision", ("allow",))])
        except Exception as exc:
            assert "withdrawn" in str(exc), exc

    await asyncio.gather(*(answer(a, 0.7 + 0.03 * i) for i, a in enumerate(sorted(by_session))))
    outcomes = {"answered": 0, "withdrawn": 0}
    for reply in await asyncio.gather(*held):
        _, ask = await w.store.get_ask(w.human, reply.headers["compass-ask"])
        assert ask.ending is not None
        if ask.ending.kind is EndingKind.ANSWERED:
            assert reply.content == ALLOWED
            outcomes["answered"] += 1
        else:
            assert ask.ending.kind is EndingKind.WITHDRAWN_BY_AGENT
            assert reply.content == denied("Compass: nobody answered within the hook's 6 s")
            outcomes["withdrawn"] += 1
    assert sum(outcomes.values()) == TRIALS


async def test_the_database_down_falls_back_at_once(own_postgres: Any) -> None:  # noqa: F811
    from compass_server.store import Database, Store

    pg, url = own_postgres
    db = Database(url, min_size=1, max_size=2)
    await db.open()
    try:
        w = await World.create(Store(db))
        token = await hook_token(w)
    finally:
        await db.close()
    server = ServerProcess(url).start()
    try:
        await asyncio.to_thread(pg.stop)
        # The token's sign-in can't be checked, or (cached) its policy can't
        # be read: either way the fallback, and why.
        for _ in range(3):
            reply = await post(server, token, PERMISSION, fallback="deny")
            assert reply.status_code == 200, reply.text
            why = reply.headers["compass-reason"]
            assert why.startswith("Compass can't take this request: "), why
            assert "database" in why, why
            assert reply.content == denied(f"Compass: {why}")
    finally:
        await asyncio.to_thread(pg.start)
        assert server.stop() == 0
    assert not [line for line in server.log if "Traceback" in line], server.log[-20:]
