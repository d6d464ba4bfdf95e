"""A Slack app end to end: an admin connects it and maps a channel; asks
posted there reach a Slack stand-in on loopback as interactive messages
(checked with Slack's own Block Kit models); clicks and modal submissions,
signed as Slack signs them, answer or decline under the same rules as every
surface; and every ending edits the message in place, through Slack's rate
limits and a revoked token."""

from __future__ import annotations

import asyncio
import datetime
import json
import time
from collections.abc import AsyncIterator
from typing import Any

import httpx
import psycopg
import pytest

from compass.v1 import admin_pb2 as ad
from compass_server.store.types import (
    Answer,
    Ask,
    AskOption,
    AskQuestion,
    Channel,
    Operator,
    Surface,
)
from compass_server.store.vault import new_key
from tests.servers import CallError, GrpcClient
from tests.slack_standin import (
    PUBLIC_URL,
    SECRET,
    TEAM,
    TOKEN,
    Call,
    Slack,
    SlackStandIn,
    buttons,
    checked_message,
    checked_view,
    slack_server,
    texts,
)
from tests.test_people_sessions import session_for
from tests.test_webhooks_cli import cli
from tests.world import World, two_question_ask

pytestmark = pytest.mark.timeout(120)

SLACK_CHANNEL = "C0ASKS"
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
        database_url,
        tmp_path_factory.mktemp("slack"),
        standin,
        KEY,
        webhook_concurrency=16,
        webhook_concurrency_per_endpoint=16,
        expiry_interval_seconds=0.3,
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
    standin.refused.clear()
    yield world
    # One app per Slack team: a finished test's goes.
    async with await psycopg.AsyncConnection.connect(srv.database_url) as conn:
        await conn.execute(
            "DELETE FROM webhook_endpoints WHERE workspace_id = %s", (world.workspace_id,)
        )


def tok(w: World, who: Any = None) -> str:
    return w.tokens[(who or w.human).account_id]


async def connect(
    rpc: GrpcClient, w: World, channel: Channel | None = None, *, email_match: bool = False
) -> ad.SlackAppInfo:
    made = await rpc.call(
        "ConnectSlackApp",
        ad.ConnectSlackAppRequest(
            team_id=TEAM, bot_token=TOKEN, signing_secret=SECRET, email_match=email_match
        ),
        tok(w),
    )
    mapped = await rpc.call(
        "MapSlackChannel",
        ad.MapSlackChannelRequest(
            app_id=made.app.app_id,
            channel_id=str((channel or w.channel).channel_id),
            slack_channel=SLACK_CHANNEL,
        ),
        tok(w),
    )
    return mapped.app  # type: ignore[no-any-return]


def pick(question_id: str = "db", n: int = 3) -> Ask:
    return Ask(
        questions=(
            AskQuestion(
                question_id=question_id,
                question="Which database?",
                header="Storage",
                options=tuple(
                    AskOption(id=f"o{i}", label=f"Option {i}", description=f"about {i}")
                    for i in range(n)
                ),
                recommended=0,
            ),
        )
    )


def ask_id_of(message: Any) -> str:
    return next(b.ask_id for b in message.blocks if isinstance(b, Ask))


def about(ask_id: str) -> Any:
    return lambda c: ask_id in json.dumps(c.body)


async def link_by_email(srv: Any, standin: SlackStandIn, w: World, who: Any, user: str) -> None:
    email = f"{user.lower()}@example.test"
    await srv.store.set_email(Operator(w.workspace_id), who.account_id, email)
    standin.users[user] = {
        "id": user,
        "team_id": TEAM,
        "is_bot": False,
        "is_email_confirmed": True,
        "profile": {"email": email},
    }


async def history(srv: Any, ask_id: str) -> list[tuple[str, str | None]]:
    async with await psycopg.AsyncConnection.connect(srv.database_url) as conn:
        cur = await conn.execute(
            "SELECT kind, surface FROM ask_history WHERE ask_id = %s AND kind <> 'posted' "
            "ORDER BY id",
            (ask_id,),
        )
        return [(r[0], r[1]) for r in await cur.fetchall()]


async def test_an_admin_connects_lists_maps_and_disconnects_an_app_whose_secrets_are_sealed(
    rpc: GrpcClient, w: World, srv: Any
) -> None:
    app = await connect(rpc, w)
    assert app.team_id == TEAM and app.enabled
    assert [(c.channel_id, c.slack_channel) for c in app.channels] == [
        (str(w.channel.channel_id), SLACK_CHANNEL)
    ]
    listed = await rpc.call("ListSlackApps", ad.ListSlackAppsRequest(), tok(w))
    assert [a.app_id for a in listed.apps] == [app.app_id]
    assert TOKEN not in str(listed) and SECRET not in str(listed)
    async with await psycopg.AsyncConnection.connect(srv.database_url) as conn:
        cur = await conn.execute(
            "SELECT url_sealed, secret_sealed FROM webhook_endpoints WHERE id = %s",
            (app.app_id,),
        )
        sealed = await cur.fetchone()
    assert sealed is not None
    assert TOKEN.encode() not in bytes(sealed[0]) and SECRET.encode() not in bytes(sealed[1])

    refusals = [
        (
            ad.ConnectSlackAppRequest(team_id=TEAM, bot_token=TOKEN, signing_secret=SECRET),
            tok(w),
            "already_exists",
        ),
        (
            ad.ConnectSlackAppRequest(team_id="T2", bot_token="xoxp-user", signing_secret=SECRET),
            tok(w),
            "invalid_argument",
        ),
        (
            ad.ConnectSlackAppRequest(team_id="T 2", bot_token=TOKEN, signing_secret=SECRET),
            tok(w),
            "invalid_argument",
        ),
        (
            ad.ConnectSlackAppRequest(team_id="T3", bot_token=TOKEN, signing_secret=SECRET),
            tok(w, w.other_human),
            "permission_denied",
        ),
    ]
    for req, token, code in refusals:
        with pytest.raises(CallError) as err:
            await rpc.call("ConnectSlackApp", req, token)
        assert err.value.code == code, err.value
        assert TOKEN not in err.value.message
    dm_or_unknown = ad.MapSlackChannelRequest(
        app_id=app.app_id, channel_id=str(w.workspace_id), slack_channel="C1"
    )
    with pytest.raises(CallError) as err:
        await rpc.call("MapSlackChannel", dm_or_unknown, tok(w))
    assert err.value.code == "not_found"
    # A Slack app's signing secret is Slack's: it is not rotated like a webhook's.
    with pytest.raises(CallError) as err:
        await rpc.call(
            "RotateWebhookSecret", ad.RotateWebhookSecretRequest(webhook_id=app.app_id), tok(w)
        )
    assert err.value.code == "failed_precondition"

    await rpc.call("DisconnectSlackApp", ad.DisconnectSlackAppRequest(app_id=app.app_id), tok(w))
    listed = await rpc.call("ListSlackApps", ad.ListSlackAppsRequest(), tok(w))
    assert list(listed.apps) == []
    with pytest.raises(CallError) as err:
        await rpc.call(
            "DisconnectSlackApp", ad.DisconnectSlackAppRequest(app_id=app.app_id), tok(w)
        )
    assert err.value.code == "not_found"


async def test_a_click_answers_once_as_the_linked_person_and_the_message_closes(
    rpc: GrpcClient, w: World, srv: Any, standin: SlackStandIn, slack: Slack
) -> None:
    await connect(rpc, w)
    posted = await w.post_ask(w.agent, pick())
    ask_id = ask_id_of(posted)
    (call,) = await standin.wait("chat.postMessage", where=about(ask_id))
    assert call.token == TOKEN and call.body["channel"] == SLACK_CHANNEL
    message = checked_message(call.body)
    assert message["text"] == "scout asks in #general: Which database?"
    assert texts(message)[1].splitlines()[:3] == [
        "*Storage* · Which database?",
        "• Option 0 _(recommended)_",
        "    about 0",
    ]
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

    # Not linked yet: told how to connect, and nothing is answered.
    r = await slack.send(slack.click("U1ADA", shown[1]))
    assert r.status_code == 200
    (told,) = await standin.wait("chat.postEphemeral")
    assert told.body["user"] == "U1ADA"
    link = told.body["text"].split("<", 1)[1].split("|", 1)[0]
    assert link.startswith(f"{PUBLIC_URL}/slack/link/")
    assert await history(srv, ask_id) == []

    # The link connects whoever opens it signed in, after they confirm.
    path = link.removeprefix(PUBLIC_URL)
    base = f"http://127.0.0.1:{srv.http_port}"
    secret = await session_for(srv.store, w, w.human)
    async with httpx.AsyncClient(base_url=base) as web:
        anon = await web.get(path)
        assert anon.status_code == 401 and "Sign in" in anon.text
        # Its public URL is https: the cookie is this host's alone.
        assert (
            await web.get(path, headers={"cookie": f"compass_session={secret}"})
        ).status_code == 401
        mine = {"cookie": f"__Host-compass_session={secret}"}
        shown_page = await web.get(path, headers=mine)
        assert shown_page.status_code == 200 and "<form" in shown_page.text
        forged = await web.post(path, headers={**mine, "origin": "https://evil.test"})
        assert forged.status_code == 403
        done = await web.post(path, headers={**mine, "origin": PUBLIC_URL})
        assert done.status_code == 200, done.text
        again = await web.post(path, headers={**mine, "origin": PUBLIC_URL})
        assert again.status_code == 410

    # The same click twice (a double click, or Slack's retry) answers once.
    click = slack.click("U1ADA", shown[1])
    first, second = await asyncio.gather(slack.send(click), slack.send(click))
    assert first.status_code == second.status_code == 200
    (update,) = await standin.wait("chat.update", where=about(ask_id))
    ended = checked_message(update.body)
    assert update.body["ts"] == "1.0001" or update.body["ts"].endswith(".0001")
    assert update.body["channel"] == SLACK_CHANNEL
    assert buttons(ended) == []
    assert texts(ended)[1].splitlines() == ["*Answered by ada*", "Which database? → Option 1"]
    assert await history(srv, ask_id) == [("answered", "slack")]
    _, ask = await srv.store.get_ask(w.human, ask_id)
    assert ask.questions[0].chosen_option_ids == ("o1",)

    # A click on the ended ask is told how it ended.
    before = len(standin.of("chat.postEphemeral"))
    await slack.send(slack.click("U1ADA", shown[0]))
    told_calls = await standin.wait("chat.postEphemeral", before + 1)
    assert told_calls[-1].body["text"] == "This ask has ended: Answered by ada."
    await asyncio.sleep(0.3)
    assert len(standin.of("chat.update")) == 1


async def test_a_modal_answers_several_questions_refusing_inline_what_respond_to_ask_refuses(
    rpc: GrpcClient, w: World, srv: Any, standin: SlackStandIn, slack: Slack
) -> None:
    await connect(rpc, w, email_match=True)
    await link_by_email(srv, standin, w, w.human, "U2ADA")
    ask_id = ask_id_of(await w.post_ask(w.agent, two_question_ask()))
    (call,) = await standin.wait("chat.postMessage", where=about(ask_id))
    shown = buttons(checked_message(call.body))
    assert [b["text"]["text"] for b in shown] == ["Answer", "Decline…", "Open in Compass"]

    await slack.send(slack.click("U2ADA", shown[0]))
    (opened,) = await standin.wait("views.open")
    assert opened.body["trigger_id"].startswith("trigger-")
    assert [c.method for c in standin.calls if c.method == "users.info"] == ["users.info"]
    view = checked_view(opened.body["view"])
    inputs = [b for b in view["blocks"] if b["type"] == "input"]
    assert [b["element"]["type"] for b in inputs] == [
        "radio_buttons",
        "plain_text_input",
        "checkboxes",
        "plain_text_input",
    ]
    assert inputs[0]["label"]["text"] == "Storage · Which database?"

    def option(value: str) -> dict[str, Any]:
        return {"value": value, "text": {"type": "plain_text", "text": value}}

    bad = {
        "q0": {"choice": {"type": "radio_buttons", "selected_option": option("oracle")}},
        "q1": {"choice": {"type": "checkboxes", "selected_options": []}},
    }
    refused = await slack.send(slack.submit("U2ADA", view, bad))
    assert refused.status_code == 200
    said = refused.json()
    assert said["response_action"] == "errors"
    assert "oracle" in said["errors"]["q0"]
    assert await history(srv, ask_id) == []

    good = {
        "q0": {"choice": {"type": "radio_buttons", "selected_option": option("pg")}},
        "q1": {"choice": {"type": "checkboxes", "selected_options": [option("go"), option("ts")]}},
        "t1": {"text": {"type": "plain_text_input", "value": "and some Zig"}},
    }
    ok = await slack.send(slack.submit("U2ADA", view, good))
    assert ok.status_code == 200 and ok.content == b""
    _, ask = await srv.store.get_ask(w.human, ask_id)
    assert [q.chosen_option_ids for q in ask.questions] == [("pg",), ("go", "ts")]
    assert ask.questions[1].custom_text == "and some Zig"
    (update,) = await standin.wait("chat.update", where=about(ask_id))
    assert texts(checked_message(update.body))[1].startswith("*Answered by ada*")
    # The same submission again (Slack's retry) is not an error: it is theirs.
    again = await slack.send(slack.submit("U2ADA", view, good))
    assert again.status_code == 200 and again.content == b""
    assert await history(srv, ask_id) == [("answered", "slack")]


async def test_a_decline_from_slack_and_an_ask_for_someone_else(
    rpc: GrpcClient, w: World, srv: Any, standin: SlackStandIn, slack: Slack
) -> None:
    await connect(rpc, w, email_match=True)
    await link_by_email(srv, standin, w, w.human, "U3ADA")
    # The ask names only ada: grace's click answers nothing and says whom it is for.
    for_ada = Ask(questions=pick().questions, answerer_ids=(w.human.account_id,))
    ask_id = ask_id_of(await w.post_ask(w.agent, for_ada))
    (call,) = await standin.wait("chat.postMessage", where=about(ask_id))
    shown = buttons(call.body)
    await link_by_email(srv, standin, w, w.other_human, "U3GRACE")
    await slack.send(slack.click("U3GRACE", shown[0]))
    told = await standin.wait("chat.postEphemeral", where=lambda c: c.body["user"] == "U3GRACE")
    assert told[0].body["text"] == "This ask is for @ada."
    assert await history(srv, ask_id) == []

    await slack.send(slack.click("U3ADA", shown[4]))
    (opened,) = await standin.wait("views.open")
    view = checked_view(opened.body["view"])
    values = {"reason": {"text": {"type": "plain_text_input", "value": "not my call"}}}
    r = await slack.send(slack.submit("U3ADA", view, values))
    assert r.status_code == 200 and r.content == b""
    (update,) = await standin.wait("chat.update", where=about(ask_id))
    assert texts(checked_message(update.body))[1] == "*Declined by ada: not my call*"
    assert await history(srv, ask_id) == [("declined", "slack")]


async def test_only_requests_signed_by_the_app_within_the_window_are_heard(
    rpc: GrpcClient, w: World, srv: Any, standin: SlackStandIn, slack: Slack
) -> None:
    await connect(rpc, w, email_match=True)
    await link_by_email(srv, standin, w, w.human, "U4ADA")
    ask_id = ask_id_of(await w.post_ask(w.agent, pick()))
    (call,) = await standin.wait("chat.postMessage", where=about(ask_id))
    click = slack.click("U4ADA", buttons(call.body)[0])
    for kwargs in (
        {"signed": False},
        {"secret": "someone-elses-secret"},
        {"at": int(time.time()) - 6 * 60},
        {"at": int(time.time()) + 6 * 60},
    ):
        r = await slack.send(click, **kwargs)  # type: ignore[arg-type]
        assert r.status_code == 401, kwargs
        assert SECRET not in r.text
    unknown_team = {**click, "team": {"id": "TNOBODY"}, "user": {"id": "U4ADA"}}
    assert (await slack.send(unknown_team)).status_code == 401
    garbage = await slack.client.post(slack.url, content=b"payload=%7Bnot json")
    assert garbage.status_code == 401
    huge = await slack.client.post(slack.url, content=b"x" * (300 * 1024))
    assert huge.status_code == 413
    await asyncio.sleep(0.3)
    assert await history(srv, ask_id) == []
    assert standin.of("chat.postEphemeral") == [] and standin.of("users.info") == []


async def test_rate_limits_and_a_revoked_token_delay_an_update_but_never_lose_it(
    rpc: GrpcClient, w: World, srv: Any, standin: SlackStandIn
) -> None:
    app = await connect(rpc, w)
    # Slack is down for the post: it is sent again, once.
    standin.failing["chat.postMessage"] = 2
    ask_id = ask_id_of(await w.post_ask(w.agent, pick()))
    await standin.wait("chat.postMessage", where=about(ask_id))
    assert [c.method for c in standin.refused] == ["chat.postMessage"] * 2
    assert len(standin.of("chat.postMessage")) == 1
    standin.revoked.add(TOKEN)
    started = time.monotonic()
    await w.store.cancel_ask(w.agent, ask_id)
    # The ending is written at once: Slack being down holds nothing up.
    assert time.monotonic() - started < 1.0
    deadline = time.monotonic() + 10
    while True:
        listed = await rpc.call("ListSlackApps", ad.ListSlackAppsRequest(), tok(w))
        (shown,) = listed.apps
        if "token_revoked" in shown.last_error:
            break
        assert time.monotonic() < deadline, shown
        await asyncio.sleep(0.1)
    assert shown.app_id == app.app_id and shown.pending_deliveries >= 1
    assert standin.of("chat.update") == []

    # Slack gives the token back but limits the rate: the update waits Retry-After.
    standin.limited["chat.update"] = 1
    standin.revoked.clear()
    (update,) = await standin.wait("chat.update", where=about(ask_id))
    limited = [c for c in standin.refused if c.method == "chat.update"]
    assert limited, "the update was never refused"
    assert texts(checked_message(update.body))[1] == "*Withdrawn by scout*"


async def test_an_expired_ask_is_closed_in_slack_and_a_late_click_is_told(
    rpc: GrpcClient, w: World, srv: Any, standin: SlackStandIn, slack: Slack
) -> None:
    await connect(rpc, w, email_match=True)
    await link_by_email(srv, standin, w, w.human, "U5ADA")
    due = datetime.datetime.now(datetime.UTC) + datetime.timedelta(seconds=1)
    ask_id = ask_id_of(await w.post_ask(w.agent, Ask(questions=pick().questions, deadline=due)))
    (call,) = await standin.wait("chat.postMessage", where=about(ask_id))
    assert "It expires <!date^" in texts(checked_message(call.body))[0]
    (update,) = await standin.wait("chat.update", where=about(ask_id))
    closed = texts(checked_message(update.body))[1].splitlines()
    assert closed[0] == "*Expired*" and closed[1].startswith("Nobody answered by <!date^")
    await slack.send(slack.click("U5ADA", buttons(call.body)[0]))
    (told,) = await standin.wait("chat.postEphemeral")
    assert told.body["text"] == "This ask has ended: Expired."
    assert await history(srv, ask_id) == [("expired", "server")]


async def race_world(srv: Any, standin: SlackStandIn, w: World, rpc: GrpcClient) -> Channel:
    channel = await srv.store.create_channel(
        w.human, "race", "", [w.agent.account_id, w.other_human.account_id]
    )
    await connect(rpc, w, channel, email_match=True)
    await link_by_email(srv, standin, w, w.other_human, "URGRACE")
    return channel


TRIALS = 100


async def test_a_slack_answer_racing_a_page_answer_ends_once_and_every_message_says_who_won(
    rpc: GrpcClient, w: World, srv: Any, standin: SlackStandIn, slack: Slack
) -> None:
    channel = await race_world(srv, standin, w, rpc)
    ask_ids = [ask_id_of(await w.post_ask(w.agent, pick(), channel=channel)) for _ in range(TRIALS)]
    posts = await standin.wait("chat.postMessage", TRIALS, wait=40)
    button = {ask_id_of_call(c): buttons(c.body)[0] for c in posts}
    page_won: dict[str, bool] = {}

    async def on_page(ask_id: str) -> None:
        try:
            await srv.store.answer_ask(
                w.human, ask_id, [Answer("db", ("o2",))], surface=Surface.WEB
            )
            page_won[ask_id] = True
        except Exception as exc:
            assert getattr(exc, "message", "").startswith("the ask was") or exc is not None
            page_won[ask_id] = False

    async def trial(ask_id: str) -> None:
        await asyncio.gather(
            slack.send(slack.click("URGRACE", button[ask_id], SLACK_CHANNEL)), on_page(ask_id)
        )

    await asyncio.gather(*(trial(a) for a in ask_ids))
    updates = await standin.wait("chat.update", TRIALS, wait=40)
    by_ask = {ask_id_of_call(c): c for c in updates}
    assert set(by_ask) == set(ask_ids)
    for ask_id in ask_ids:
        ends = await history(srv, ask_id)
        assert len(ends) == 1, ends
        winner = "ada" if ends[0][1] == "web" else "grace"
        assert page_won[ask_id] is (winner == "ada")
        assert texts(checked_message(by_ask[ask_id].body))[1].startswith(f"*Answered by {winner}*")
    # Each Slack click that lost is told who won.
    lost = sum(page_won.values())
    told = await standin.wait(
        "chat.postEphemeral",
        lost,
        where=lambda c: c.body["text"] == "This ask has ended: Answered by ada.",
        wait=20,
    )
    assert len(told) == lost
    assert len(standin.of("chat.update")) == TRIALS


async def test_a_slack_decline_racing_the_agents_withdraw_ends_once(
    rpc: GrpcClient, w: World, srv: Any, standin: SlackStandIn, slack: Slack
) -> None:
    channel = await race_world(srv, standin, w, rpc)
    ask_ids = [
        ask_id_of(await w.post_ask(w.agent, two_question_ask(), channel=channel))
        for _ in range(TRIALS)
    ]
    await standin.wait("chat.postMessage", TRIALS, wait=40)
    values = {"reason": {"text": {"type": "plain_text_input", "value": "no"}}}
    slack_said: dict[str, httpx.Response] = {}

    async def trial(ask_id: str) -> None:
        view = {
            "type": "modal",
            "callback_id": "compass-decline",
            "private_metadata": json.dumps({"a": ask_id, "c": SLACK_CHANNEL}),
            "blocks": [{"type": "input", "block_id": "reason"}],
        }

        async def decline() -> None:
            slack_said[ask_id] = await slack.send(slack.submit("URGRACE", view, values))

        await asyncio.gather(decline(), w.store.cancel_ask(w.agent, ask_id))

    await asyncio.gather(*(trial(a) for a in ask_ids))
    updates = await standin.wait("chat.update", TRIALS, wait=40)
    by_ask = {ask_id_of_call(c): c for c in updates}
    assert set(by_ask) == set(ask_ids)
    for ask_id in ask_ids:
        ends = await history(srv, ask_id)
        assert len(ends) == 1, ends
        said = slack_said[ask_id]
        assert said.status_code == 200
        shown = texts(checked_message(by_ask[ask_id].body))[1]
        if ends[0][0] == "declined":
            assert said.content == b""
            assert shown == "*Declined by grace: no*"
        else:
            assert ends[0][0] == "withdrawn_by_agent"
            assert said.json()["errors"]["reason"] == "This ask has ended: Withdrawn by scout."
            assert shown == "*Withdrawn by scout*"
    assert len(standin.of("chat.update")) == TRIALS


def ask_id_of_call(c: Call) -> str:
    for b in c.body["blocks"]:
        if b["type"] == "context":
            text = b["elements"][0]["text"]
            if text.startswith("Ask `"):
                return str(text.split("`")[1])
    for b in c.body["blocks"]:
        if b["type"] == "context":
            # An ended message links the ask: …/#/ask/<id>|Open in Compass>
            text = b["elements"][0]["text"]
            if "/#/ask/" in text:
                return str(text.split("/#/ask/")[1].split("|")[0])
    raise AssertionError(c.body)


@pytest.mark.timeout(300)
async def test_the_operator_connects_and_maps_an_app_from_the_command_line(
    w: World, srv: Any, standin: SlackStandIn, tmp_path: Any
) -> None:
    url, ws = srv.database_url, str(w.workspace_id)
    token_file = tmp_path / "bot-token"
    token_file.write_text(TOKEN + "\n")
    env = {"COMPASS_WEBHOOK_KEY": KEY, "SLACK_SIGNING_SECRET": SECRET}
    refused = await cli(
        url, "connect-slack-app", "--workspace", ws, "--team", TEAM, ok=False, env=env
    )
    assert "SLACK_BOT_TOKEN" in json.dumps(refused)
    made = await cli(
        url,
        "connect-slack-app",
        "--workspace",
        ws,
        "--team",
        TEAM,
        "--bot-token-file",
        str(token_file),
        env=env,
    )
    assert made["team_id"] == TEAM and made["email_match"] is False
    app = made["app_id"]
    channel = str(w.channel.channel_id)
    mapped = await cli(
        url,
        "map-slack-channel",
        "--app",
        app,
        "--channel",
        channel,
        "--slack-channel",
        "C0CLI",
        env=env,
    )
    assert mapped["channels"] == [{"channel_id": channel, "slack_channel": "C0CLI"}]
    (listed,) = (await cli(url, "list-slack-apps", "--workspace", ws, env=env))["apps"]
    assert listed["app_id"] == app
    assert TOKEN not in json.dumps(listed) and SECRET not in json.dumps(listed)
    # The running server sends what the commands set up.
    ask_id = ask_id_of(await w.post_ask(w.agent, pick()))
    (call,) = await standin.wait("chat.postMessage", where=about(ask_id))
    assert call.body["channel"] == "C0CLI"
    unmapped = await cli(url, "unmap-slack-channel", "--app", app, "--channel", channel, env=env)
    assert unmapped["channels"] == []
    gone = await cli(url, "disconnect-slack-app", app, env=env)
    assert gone == {"app_id": app, "disconnected": True}
    assert (await cli(url, "list-slack-apps", "--workspace", ws, env=env))["apps"] == []


async def test_a_modal_takes_text_by_the_rule_every_surface_keeps(
    rpc: GrpcClient, w: World, srv: Any, standin: SlackStandIn, slack: Slack
) -> None:
    await connect(rpc, w, email_match=True)
    await link_by_email(srv, standin, w, w.human, "U9ADA")
    ask_id = ask_id_of(await w.post_ask(w.agent, two_question_ask()))
    (call,) = await standin.wait("chat.postMessage", where=about(ask_id))
    answer, decline = buttons(checked_message(call.body))[:2]
    await slack.send(slack.click("U9ADA", answer))
    (opened,) = await standin.wait("views.open")
    view = checked_view(opened.body["view"])
    typed = {"t1": {"text": {"type": "plain_text_input", "value": "red \x1b[31m text"}}}
    refused = await slack.send(slack.submit("U9ADA", view, typed))
    said = refused.json()
    assert said["response_action"] == "errors", said
    assert "has a control character (U+001B) at position 4" in said["errors"]["t1"]
    standin.calls.clear()
    await slack.send(slack.click("U9ADA", decline))
    (opened,) = await standin.wait("views.open")
    view = checked_view(opened.body["view"])
    typed = {"reason": {"text": {"type": "plain_text_input", "value": "ding\x07"}}}
    refused = await slack.send(slack.submit("U9ADA", view, typed))
    said = refused.json()
    assert "has a control character (U+0007) at position 4" in said["errors"]["reason"], said
    assert await history(srv, ask_id) == []
