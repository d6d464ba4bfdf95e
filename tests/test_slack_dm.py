"""A Slack direct message as a surface: a person whose Slack account is
linked to their workspace's app turns it on, and each ask for them (and each
reminder or escalation that reaches them) comes from the app as a direct
message with the ask's buttons, through the durable deliveries, held by
their quiet hours unless urgent. Against the Slack stand-in on loopback."""

from __future__ import annotations

import asyncio
import dataclasses
import datetime
import json
from collections.abc import AsyncIterator
from typing import Any

import psycopg
import pytest

from compass.v1 import admin_pb2 as ad
from compass.v1 import preferences_pb2 as pp
from compass_server.store.types import FollowUp
from tests.servers import CallError, GrpcClient
from tests.slack_standin import (
    PUBLIC_URL,
    SECRET,
    TEAM,
    TOKEN,
    Slack,
    SlackStandIn,
    buttons,
    checked_message,
    slack_server,
)
from tests.test_push import KEY as PUSH_KEY
from tests.test_slack_app import about, ask_id_of, history, pick
from tests.world import World

pytestmark = pytest.mark.timeout(120)

# The push tests' webhook key: GetNotificationPreferences makes the
# deployment's VAPID key on first use, sealed with the key of whichever
# server asks first.
KEY = PUSH_KEY


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
        database_url,
        tmp_path_factory.mktemp("slack-dm"),
        standin,
        KEY,
        expiry_interval_seconds=0.2,
    ) as s:
        yield s


@pytest.fixture(scope="module")
async def rpc(srv: Any) -> AsyncIterator[GrpcClient]:
    c = GrpcClient(srv.grpc_port)
    yield c
    await c.close()


@pytest.fixture
async def w(srv: Any, standin: SlackStandIn) -> AsyncIterator[World]:
    world = await World.create(srv.store)
    standin.calls.clear()
    yield world
    # One app per Slack team: a finished test's goes.
    async with await psycopg.AsyncConnection.connect(srv.database_url) as conn:
        await conn.execute(
            "DELETE FROM webhook_endpoints WHERE workspace_id = %s", (world.workspace_id,)
        )


def tok(w: World, who: Any) -> str:
    return w.tokens[who.account_id]


async def connect(rpc: GrpcClient, w: World) -> None:
    await rpc.call(
        "ConnectSlackApp",
        ad.ConnectSlackAppRequest(team_id=TEAM, bot_token=TOKEN, signing_secret=SECRET),
        tok(w, w.human),
    )


async def link(srv: Any, w: World, who: Any, user: str) -> None:
    """As the person's opening of the link Slack gave them does."""
    code = await srv.slack.link_code(w.workspace_id, TEAM, user, datetime.timedelta(minutes=5))
    assert await srv.slack.redeem_code(who, who.account_id, code) == user


def prefs(**changes: Any) -> pp.NotificationPreferences:
    base = pp.NotificationPreferences(
        page=True, push=True, email=pp.MAIL_PREFERENCE_NAMED, time_zone="UTC"
    )
    for k, v in changes.items():
        setattr(base, k, v)
    return base


async def set_prefs(rpc: GrpcClient, w: World, who: Any, **changes: Any) -> Any:
    r = await rpc.call(
        "SetNotificationPreferences",
        pp.SetNotificationPreferencesRequest(preferences=prefs(**changes)),
        tok(w, who),
    )
    return r.preferences


def to(user: str) -> Any:
    return lambda c: c.body.get("channel") == user


async def dm_deliveries(srv: Any, ask_id: str) -> list[tuple[str, str]]:
    """The ask's direct-message deliveries: (dedupe key, state)."""
    async with await psycopg.AsyncConnection.connect(srv.database_url) as conn:
        cur = await conn.execute(
            "SELECT dedupe_key, state FROM webhook_deliveries "
            "WHERE subject = %s AND dedupe_key LIKE 'slack.dm.%%' ORDER BY dedupe_key",
            (ask_id,),
        )
        return [(r[0], r[1]) for r in await cur.fetchall()]


async def settled(srv: Any, ask_id: str, expected: list[tuple[str, str]]) -> None:
    """Waits for the ask's direct-message deliveries to be as expected (an
    attempt is recorded a moment after Slack took it)."""
    give_up = asyncio.get_running_loop().time() + 20
    while (got := await dm_deliveries(srv, ask_id)) != expected:
        assert asyncio.get_running_loop().time() < give_up, got
        await asyncio.sleep(0.05)


async def attempt_errors(srv: Any, ask_id: str) -> list[str]:
    async with await psycopg.AsyncConnection.connect(srv.database_url) as conn:
        cur = await conn.execute(
            "SELECT a.error FROM webhook_attempts a "
            "JOIN webhook_deliveries d ON d.id = a.delivery_id "
            "WHERE d.subject = %s AND d.dedupe_key LIKE 'slack.dm.%%'",
            (ask_id,),
        )
        return [r[0] for r in await cur.fetchall()]


async def test_a_linked_person_turns_dms_on_and_answers_the_ask_from_its_buttons(
    rpc: GrpcClient, w: World, srv: Any, standin: SlackStandIn
) -> None:
    await connect(rpc, w)
    await w.store.add_channel_member(w.human, w.channel.channel_id, w.other_human.account_id)
    got = await rpc.call(
        "GetNotificationPreferences", pp.GetNotificationPreferencesRequest(), tok(w, w.human)
    )
    assert not got.slack_dm_available and not got.preferences.slack_dm
    # Not linked yet: refused, and said why.
    with pytest.raises(CallError) as err:
        await set_prefs(rpc, w, w.human, slack_dm=True)
    assert err.value.code == "failed_precondition"
    assert "Slack account linked" in err.value.message

    await link(srv, w, w.human, "UDMADA")
    await link(srv, w, w.other_human, "UDMGRACE")
    got = await rpc.call(
        "GetNotificationPreferences", pp.GetNotificationPreferencesRequest(), tok(w, w.human)
    )
    assert got.slack_dm_available
    assert (await set_prefs(rpc, w, w.human, slack_dm=True)).slack_dm
    # Kept: read again.
    got = await rpc.call(
        "GetNotificationPreferences", pp.GetNotificationPreferencesRequest(), tok(w, w.human)
    )
    assert got.preferences.slack_dm

    # An ask naming both: ada (DMs on) gets one; grace (linked, DMs off) none.
    ask = dataclasses.replace(pick(), answerer_ids=(w.human.account_id, w.other_human.account_id))
    ask_id = ask_id_of(await w.post_ask(w.agent, ask))
    (call,) = await standin.wait("chat.postMessage", where=lambda c: to("UDMADA")(c))
    assert call.token == TOKEN and about(ask_id)(call)
    message = checked_message(call.body)
    assert message["text"] == "scout asks in #general: Which database?"
    shown = buttons(message)
    assert [b["text"]["text"] for b in shown] == [
        "Option 0",
        "Option 1",
        "Option 2",
        "Other…",
        "Decline…",
        "Open in Compass",
    ]
    assert shown[-1]["url"] == f"{PUBLIC_URL}/#/ask/{ask_id}"
    await settled(srv, ask_id, [(f"slack.dm.posted:{ask_id}:{w.human.account_id}", "delivered")])
    assert not [c for c in standin.of("chat.postMessage") if to("UDMGRACE")(c)]

    # A click in the direct message answers as the linked person.
    slack = Slack(srv.http_port)
    try:
        r = await slack.send(slack.click("UDMADA", shown[1], channel="DUDMADA"))
        assert r.status_code == 200
        give_up = asyncio.get_running_loop().time() + 20
        while await history(srv, ask_id) != [("answered", "slack")]:
            assert asyncio.get_running_loop().time() < give_up, await history(srv, ask_id)
            await asyncio.sleep(0.05)
    finally:
        await slack.close()
    _, answered = await srv.store.get_ask(w.human, ask_id)
    assert answered.questions[0].chosen_option_ids == ("o1",)
    # The ending edits the direct message in place: its buttons go.
    (update,) = await standin.wait("chat.update", where=lambda c: to("UDMADA")(c))
    # Marked ended once Slack has answered the edit, just after the stand-in saw it.
    give_up = asyncio.get_running_loop().time() + 10
    async with await psycopg.AsyncConnection.connect(srv.database_url, autocommit=True) as conn:
        while True:
            cur = await conn.execute(
                "SELECT slack_channel, ts, ended FROM slack_direct_messages WHERE ask_id = %s",
                (ask_id,),
            )
            rows = await cur.fetchall()
            if rows == [("UDMADA", update.body["ts"], True)]:
                break
            assert asyncio.get_running_loop().time() < give_up, rows
            await asyncio.sleep(0.05)
    ended = checked_message(update.body)
    assert buttons(ended) == []
    assert "Answered by ada" in json.dumps(ended)

    # Turned off: the next ask makes no direct message.
    assert not (await set_prefs(rpc, w, w.human, slack_dm=False)).slack_dm
    quiet_id = ask_id_of(
        await w.post_ask(
            w.agent,
            dataclasses.replace(
                pick("after"), answerer_ids=(w.human.account_id, w.other_human.account_id)
            ),
        )
    )
    # The email-less, push-less workspace's only other delivery: the app's
    # own for the ask; wait for the fan-out that would have made a DM.
    await asyncio.sleep(1.0)
    assert await dm_deliveries(srv, quiet_id) == []


async def test_quiet_hours_hold_a_dm_but_an_urgent_escalation_goes(
    rpc: GrpcClient, w: World, srv: Any, standin: SlackStandIn
) -> None:
    await connect(rpc, w)
    await w.store.add_channel_member(w.human, w.channel.channel_id, w.other_human.account_id)
    await link(srv, w, w.human, "UQADA")
    now = datetime.datetime.now(datetime.UTC)
    start = (now - datetime.timedelta(hours=1)).strftime("%H:%M")
    end = (now + datetime.timedelta(hours=1)).strftime("%H:%M")
    await set_prefs(rpc, w, w.human, slack_dm=True, quiet_start=start, quiet_end=end)

    # An ask for ada in her quiet hours: held, not sent.
    held_id = ask_id_of(
        await w.post_ask(w.agent, dataclasses.replace(pick(), answerer_ids=(w.human.account_id,)))
    )
    give_up = asyncio.get_running_loop().time() + 20
    while not await attempt_errors(srv, held_id):
        assert asyncio.get_running_loop().time() < give_up
        await asyncio.sleep(0.05)
    (why,) = await attempt_errors(srv, held_id)
    assert why.startswith("held: the person's quiet hours, until ")
    assert await dm_deliveries(srv, held_id) == [
        (f"slack.dm.posted:{held_id}:{w.human.account_id}", "pending")
    ]

    # An ask for grace that escalates to ada: the escalation is urgent and goes.
    escalating = dataclasses.replace(
        pick("escalates"),
        answerer_ids=(w.other_human.account_id,),
        follow_up=FollowUp(
            escalate_after=datetime.timedelta(seconds=0.5), escalate_to=(w.human.account_id,)
        ),
    )
    esc_id = ask_id_of(await w.post_ask(w.agent, escalating))
    (call,) = await standin.wait(
        "chat.postMessage", where=lambda c: to("UQADA")(c) and about(esc_id)(c)
    )
    message = checked_message(call.body)
    assert message["text"].startswith("Urgent: scout asks in #general")
    assert message["blocks"][0]["elements"][0]["text"].startswith("Urgent: nobody has answered")
    assert buttons(message)[-1]["text"]["text"] == "Open in Compass"
    await settled(
        srv, esc_id, [(f"slack.dm.escalated.1:{esc_id}:{w.human.account_id}", "delivered")]
    )
    # The held one is still held.
    assert not [c for c in standin.of("chat.postMessage") if about(held_id)(c)]


async def test_the_settings_view_offers_a_slack_dm_once_linked(
    rpc: GrpcClient, w: World, srv: Any, browser: Any
) -> None:
    from playwright.async_api import expect

    from tests.browser import new_tab, sign_in

    await connect(rpc, w)
    async with new_tab(browser, srv) as page:
        await sign_in(page, tok(w, w.human))
        await page.get_by_role("link", name="Notification settings").click()
        await expect(page.get_by_role("heading", name="Notifications")).to_be_visible()
        await expect(page.get_by_label("Push, even with no tab open")).to_be_visible()
        # Not linked: not offered.
        await expect(page.get_by_label("A direct message in Slack")).to_have_count(0)
        await link(srv, w, w.human, "UPAGEADA")
        await page.reload()
        await page.get_by_role("link", name="Notification settings").click()
        dm = page.get_by_label("A direct message in Slack")
        await expect(dm).not_to_be_checked()
        await dm.check()
        await page.get_by_role("button", name="Save").click()
        await expect(page.locator(".settings-status")).to_have_text("Saved.")
    async with await psycopg.AsyncConnection.connect(srv.database_url) as conn:
        cur = await conn.execute(
            "SELECT slack_dm FROM notification_preferences WHERE account_id = %s",
            (w.human.account_id,),
        )
        row = await cur.fetchone()
    assert row is not None and row[0] is True


async def test_an_ask_for_the_channel_and_its_reminder_reach_the_people_with_dms_on(
    rpc: GrpcClient, w: World, srv: Any, standin: SlackStandIn
) -> None:
    await connect(rpc, w)
    await link(srv, w, w.human, "URADA")
    await set_prefs(rpc, w, w.human, slack_dm=True)
    reminding = dataclasses.replace(
        pick("reminds"),
        follow_up=FollowUp(remind_after=datetime.timedelta(seconds=0.5), remind_times=1),
    )
    # Names nobody: the channel's people but the asker.
    ask_id = ask_id_of(await w.post_ask(w.agent, reminding))
    first, reminder = await standin.wait(
        "chat.postMessage", 2, where=lambda c: to("URADA")(c) and about(ask_id)(c)
    )
    assert checked_message(first.body)["text"] == "scout asks in #general: Which database?"
    reminded = checked_message(reminder.body)
    assert reminded["text"] == "Reminder: scout asks in #general: Which database?"
    assert reminded["blocks"][0]["elements"][0]["text"] == (
        "Reminder: this ask is still waiting for your answer."
    )
    assert [b["text"]["text"] for b in buttons(reminded)][-2:] == ["Decline…", "Open in Compass"]
    await settled(
        srv,
        ask_id,
        [
            (f"slack.dm.posted:{ask_id}:{w.human.account_id}", "delivered"),
            (f"slack.dm.reminded.1:{ask_id}:{w.human.account_id}", "delivered"),
        ],
    )
