"""Slack for everyone: a person signed in with a token alone (no OpenID)
asks the page for a one-time code (CreateSlackLinkCode) and types it in
Slack (`/compass link CODE`); the Slack user who typed it is then linked to
that person, once, while the code lives, and answers in Slack as them."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from typing import Any

import httpx
import psycopg
import pytest

from compass.v1 import preferences_pb2 as pp
from compass_server.store.types import Ask, AskOption, AskQuestion
from compass_server.store.vault import new_key
from tests.servers import CallError, GrpcClient
from tests.slack_standin import TEAM, Slack, SlackStandIn, buttons, slack_server
from tests.test_slack_app import connect, history
from tests.world import World

pytestmark = pytest.mark.timeout(120)

KEY = new_key()


@pytest.fixture(scope="module")
async def standin() -> AsyncIterator[SlackStandIn]:
    s = await SlackStandIn().start()
    yield s
    await s.close()


@pytest.fixture(scope="module")
async def srv(
    database_url: str, tmp_path_factory: pytest.TempPathFactory, standin: SlackStandIn
) -> AsyncIterator[Any]:
    async with slack_server(
        database_url, tmp_path_factory.mktemp("slack-codes"), standin, KEY, slack_code_seconds=60.0
    ) as s:
        yield s


@pytest.fixture(scope="module")
async def rpc(srv: Any) -> AsyncIterator[GrpcClient]:
    c = GrpcClient(srv.grpc_port)
    yield c
    await c.close()


@pytest.fixture
async def slack(srv: Any) -> AsyncIterator[Slack]:
    s = Slack(srv.http_port)
    yield s
    await s.close()


@pytest.fixture
async def w(srv: Any, standin: SlackStandIn) -> AsyncIterator[World]:
    world = await World.create(srv.store)
    standin.calls.clear()
    yield world
    async with await psycopg.AsyncConnection.connect(srv.database_url) as conn:
        await conn.execute(
            "DELETE FROM webhook_endpoints WHERE workspace_id = %s", (world.workspace_id,)
        )


def tok(w: World, who: Any = None) -> str:
    return w.tokens[(who or w.human).account_id]


async def code_for(rpc: GrpcClient, w: World, who: Any = None) -> pp.CreateSlackLinkCodeResponse:
    return await rpc.call("CreateSlackLinkCode", pp.CreateSlackLinkCodeRequest(), tok(w, who))


async def prefs(rpc: GrpcClient, w: World, who: Any = None) -> Any:
    return await rpc.call(
        "GetNotificationPreferences", pp.GetNotificationPreferencesRequest(), tok(w, who)
    )


def said(r: httpx.Response) -> str:
    assert r.status_code == 200, r.text
    body = r.json()
    assert body["response_type"] == "ephemeral"
    return str(body["text"])


async def test_a_token_only_person_links_slack_with_a_code_and_answers_there(
    srv: Any, rpc: GrpcClient, slack: Slack, standin: SlackStandIn, w: World
) -> None:
    assert (await prefs(rpc, w)).slack_app_connected is False
    with pytest.raises(CallError) as none:
        await code_for(rpc, w)
    assert none.value.code == "failed_precondition" and "no Slack app" in none.value.message
    await connect(rpc, w)
    shown = await prefs(rpc, w)
    assert shown.slack_app_connected and not shown.slack_dm_available
    made = await code_for(rpc, w)
    assert len(made.code) == 9 and made.code[4] == "-"
    # Typed in Slack, in lower case: it links the Slack user who typed it.
    text = said(await slack.command("U0ADA", f"link {made.code.lower()}"))
    assert "now linked to ada" in text
    assert (await prefs(rpc, w)).slack_dm_available
    # Used once.
    again = said(await slack.command("U0EVE", f"link {made.code}"))
    assert "links nothing" in again

    # The linked Slack user's click answers as ada.
    message = await w.post_ask(
        w.agent,
        Ask(
            questions=(
                AskQuestion(
                    question_id="go",
                    question="Ship it?",
                    options=(AskOption("y", "Yes"), AskOption("n", "No")),
                ),
            )
        ),
    )
    ask_id = next(b.ask_id for b in message.blocks if isinstance(b, Ask))
    [post] = await standin.wait("chat.postMessage", where=lambda c: ask_id in json.dumps(c.body))
    yes = buttons(post.body)[0]
    assert yes["text"]["text"] == "Yes"
    assert (await slack.send(slack.click("U0ADA", yes))).status_code == 200
    for _ in range(400):
        if await history(srv, ask_id):
            break
        await asyncio.sleep(0.05)
    assert await history(srv, ask_id) == [("answered", "slack")]
    _, ask = await w.store.get_ask(w.human, ask_id)
    assert ask.ending is not None and ask.ending.actor_handle == "ada"


async def test_a_code_links_nothing_when_mistyped_expired_of_another_team_or_unsigned(
    srv: Any, rpc: GrpcClient, slack: Slack, w: World
) -> None:
    await connect(rpc, w)
    made = await code_for(rpc, w)
    assert "links nothing" in said(await slack.command("U0X", "link ABCD-EFGH"))
    assert "links nothing" in said(await slack.command("U0X", "link not-a-code-at-all"))
    assert "/compass link CODE" in said(await slack.command("U0X", "help"))
    # Another team's app (none here), or a bad signature: nothing read.
    other = await slack.command("U0X", f"link {made.code}", team="T0OTHER")
    assert other.status_code == 401
    forged = await slack.command("U0X", f"link {made.code}", secret="0" * 32)
    assert forged.status_code == 401
    # Past its life it links nobody.
    async with await psycopg.AsyncConnection.connect(srv.database_url) as conn:
        await conn.execute(
            "UPDATE slack_person_codes SET expires_at = now() - interval '1 second' "
            "WHERE workspace_id = %s",
            (w.workspace_id,),
        )
    assert "links nothing" in said(await slack.command("U0X", f"link {made.code}"))
    async with await psycopg.AsyncConnection.connect(srv.database_url) as conn:
        cur = await conn.execute(
            "SELECT count(*) FROM slack_people WHERE workspace_id = %s", (w.workspace_id,)
        )
        row = await cur.fetchone()
    assert row is not None and row[0] == 0


async def test_only_a_person_gets_a_code_and_each_code_is_its_own(
    srv: Any, rpc: GrpcClient, slack: Slack, w: World
) -> None:
    await connect(rpc, w)
    with pytest.raises(CallError) as agent:
        await code_for(rpc, w, w.agent)
    assert agent.value.code == "permission_denied"
    ada, grace = await code_for(rpc, w), await code_for(rpc, w, w.other_human)
    assert ada.code != grace.code
    assert "linked to grace" in said(await slack.command("U0GRACE", f"link {grace.code}"))
    assert "linked to ada" in said(await slack.command("U0ADA", f"link {ada.code}"))
    assert (await prefs(rpc, w, w.other_human)).slack_dm_available


async def test_the_command_route_answers_bad_input_with_a_clear_4xx(srv: Any) -> None:
    url = f"http://127.0.0.1:{srv.http_port}/slack/commands"
    async with httpx.AsyncClient(timeout=30) as http:
        assert (await http.get(url)).status_code == 405
        assert (await http.post(url, content=b"team_id=" + TEAM.encode())).status_code == 401
        assert (await http.post(url, content=b"\xff\xfe")).status_code == 401
        big = b"x" * (300 * 1024)
        assert (await http.post(url, content=big)).status_code == 413


@pytest.mark.browser
async def test_the_page_shows_a_code_that_links_slack_for_a_person_signed_in_with_a_token(
    srv: Any, rpc: GrpcClient, slack: Slack, browser: Any, w: World, shots: Any
) -> None:
    from playwright.async_api import expect

    from tests.browser import PHONE, new_tab, sign_in

    await connect(rpc, w)
    async with new_tab(browser, srv, viewport=PHONE) as page:
        await sign_in(page, tok(w))
        await page.goto("/#/settings")
        await expect(page.get_by_text("Answer asks in Slack as yourself.")).to_be_visible()
        await page.get_by_role("button", name="Link my Slack account").click()
        shown = page.locator("#settings-slack-code")
        await expect(shown).to_contain_text("In Slack, type /compass link ")
        await page.screenshot(path=str(shots / "web-settings-slack-code.png"), full_page=True)
        code = (await shown.locator("code").inner_text()).removeprefix("/compass link ")
        assert "now linked to ada" in said(await slack.command("U0PAGE", f"link {code}"))
        await page.reload()
        await expect(page.get_by_text("Your Slack account is linked.")).to_be_visible()
        await expect(page.get_by_label("A direct message in Slack")).to_be_visible()
