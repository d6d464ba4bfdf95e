"""Links that open one ask for one person: what the page carries, that
opening changes nothing, that its JSON answer answers only its ask as its
person, and that it opens nothing else. How the page looks and is used in a
browser: tests/test_link_page.py."""

from __future__ import annotations

import asyncio
import datetime
import html
import json
import re
from typing import Any

import httpx
import pytest

from compass.v1 import comms_pb2 as pb
from compass_server.store.errors import FailedPrecondition, InvalidArgument, PermissionDenied
from compass_server.store.links import MintedLink
from compass_server.store.types import Ask, AskOption, AskQuestion, EndingKind, Surface
from tests.servers import GrpcClient
from tests.world import World, two_question_ask

pytestmark = pytest.mark.timeout(60)


def named(*people: Any) -> Ask:
    ask = two_question_ask()
    return Ask(questions=ask.questions, answerer_ids=tuple(p.account_id for p in people))


async def ask_for(w: World, *people: Any) -> str:
    message = await w.post_ask(w.agent, named(*people))
    block = message.blocks[0]
    assert isinstance(block, Ask)
    return block.ask_id


async def mint(w: World, ask_id: str, who: Any, **kw: Any) -> MintedLink:
    return await w.store.mint_ask_link(w.workspace_id, ask_id, who.account_id, **kw)


@pytest.fixture
async def http(server: Any) -> Any:
    async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{server.http_port}") as client:
        yield client


def page_data(text: str) -> dict[str, Any]:
    """The ask the link's page carries for its script to draw."""
    found = re.search(r'<script type="application/json" id="link-data">(.*?)</script>', text)
    assert found, text
    return json.loads(found.group(1))  # type: ignore[no-any-return]


def shown_ask(data: dict[str, Any]) -> dict[str, Any]:
    [ask] = [b["ask"] for b in data["askMessage"]["blocks"] if "ask" in b]
    return ask  # type: ignore[no-any-return]


async def send(
    http: httpx.AsyncClient, secret: str, body: dict[str, Any], **kw: Any
) -> httpx.Response:
    """What the page (and a notification's tap) sends: JSON to the link."""
    return await http.post(f"/a/{secret}", json=body, **kw)


def answers(**given: Any) -> list[dict[str, Any]]:
    out = []
    for qid, value in given.items():
        chosen, words = value if isinstance(value, tuple) else (value, "")
        out.append({"questionId": qid, "chosenOptionIds": chosen, "customText": words})
    return out


async def state(w: World, ask_id: str) -> Ask:
    _, ask = await w.store.get_ask(w.human, ask_id)
    return ask


async def test_the_link_shows_its_ask_and_opening_it_changes_nothing(
    api_world: World, http: httpx.AsyncClient
) -> None:
    w = api_world
    ask_id = await ask_for(w, w.human)
    link = await mint(w, ask_id, w.human)
    for method in ("GET", "HEAD", "GET"):
        page = await http.request(method, f"/a/{link.secret}")
        assert page.status_code == 200
    assert "Which database?" in page.text and "PostgreSQL" in page.text
    assert "scout asks" in page.text
    assert page.headers["cache-control"] == "no-store"
    assert page.headers["referrer-policy"] == "no-referrer"
    assert (await state(w, ask_id)).is_open


async def test_the_link_answers_its_ask_as_its_person_and_then_shows_the_ending(
    api_world: World, http: httpx.AsyncClient
) -> None:
    w = api_world
    ask_id = await ask_for(w, w.human)
    link = await mint(w, ask_id, w.human)
    done = await send(
        http,
        link.secret,
        {
            "askId": ask_id,
            "action": "answer",
            "answers": answers(db=["pg"], langs=(["py", "go"], "and some Rust")),
        },
    )
    assert done.status_code == 200, done.text
    assert done.json()["message"] == "Your answer was recorded."
    assert done.json()["ended"] is True
    ending = shown_ask(done.json())["ending"]
    assert ending["kind"] == "ASK_ENDING_KIND_ANSWERED" and ending["actorHandle"] == "ada"
    ask = await state(w, ask_id)
    assert ask.ending is not None and ask.ending.kind is EndingKind.ANSWERED
    assert ask.ending.actor_id == w.human.account_id and ask.ending.surface is Surface.WEB
    assert ask.questions[1].chosen_option_ids == ("py", "go")
    assert ask.questions[1].custom_text == "and some Rust"
    # Later, the link shows how it ended; a second answer changes nothing.
    again = await http.get(f"/a/{link.secret}")
    assert again.status_code == 200
    assert shown_ask(page_data(again.text))["ending"]["actorHandle"] == "ada"
    twice = await send(
        http,
        link.secret,
        {"askId": ask_id, "action": "answer", "answers": answers(db=["my"], langs=[])},
    )
    assert twice.status_code == 409 and "already answered" in twice.json()["message"]
    assert twice.json()["code"] == "already_exists"
    # The refusal carries the ask as it stands, so the page can say how it ended.
    assert shown_ask(twice.json())["ending"]["actorHandle"] == "ada"
    assert (await state(w, ask_id)).questions[0].chosen_option_ids == ("pg",)


async def test_a_tap_is_recorded_as_the_notification_s_and_the_page_s_answer_as_the_page_s(
    api_world: World, http: httpx.AsyncClient, server: Any
) -> None:
    """The history says where an answer came from: a tap on a notification's
    choice (the lock screen) is `push`, the link's page is `web`."""
    w = api_world
    one_tap = Ask(
        questions=(
            AskQuestion(
                question_id="go",
                question="Ship it?",
                options=(AskOption("y", "Yes"), AskOption("n", "No")),
            ),
        ),
        answerer_ids=(w.human.account_id,),
    )
    ended = []
    for tap in (True, False):
        message = await w.post_ask(w.agent, one_tap)
        [block] = message.blocks
        assert isinstance(block, Ask)
        link = await mint(w, block.ask_id, w.human)
        body = {"askId": block.ask_id, "action": "answer", "answers": answers(go=["y"])}
        done = await send(http, link.secret, {**body, "tap": True} if tap else body)
        assert done.status_code == 200, done.text
        ended.append((await state(w, block.ask_id)).ending)
        if tap:
            tapped = block.ask_id
    assert [e.surface if e else None for e in ended] == [Surface.PUSH, Surface.WEB]
    # Over the API, the history and the ask name it too.
    client = GrpcClient(server.grpc_port)
    try:
        said = await client.call(
            "GetAskHistory", pb.GetAskHistoryRequest(ask_id=tapped), w.tokens[w.human.account_id]
        )
    finally:
        await client.close()
    assert [(h.kind, h.surface) for h in said.entries][-1] == (
        pb.ASK_HISTORY_KIND_ANSWERED,
        pb.ASK_SURFACE_PUSH,
    )


async def test_the_link_declines_and_shows_an_ending_that_came_another_way(
    api_world: World, http: httpx.AsyncClient
) -> None:
    w = api_world
    first = await ask_for(w, w.human)
    link = await mint(w, first, w.human)
    done = await send(
        http, link.secret, {"askId": first, "action": "decline", "reason": "not mine"}
    )
    assert done.json()["message"] == "You declined this ask."
    ending = shown_ask(done.json())["ending"]
    assert ending["kind"] == "ASK_ENDING_KIND_DECLINED" and ending["reason"] == "not mine"

    second = await ask_for(w, w.human)
    other = await mint(w, second, w.human)
    await w.store.cancel_ask(w.agent, second)
    shown = await http.get(f"/a/{other.secret}")
    assert (
        shown_ask(page_data(shown.text))["ending"]["kind"] == "ASK_ENDING_KIND_WITHDRAWN_BY_AGENT"
    )


async def test_the_link_answers_no_other_ask_and_opens_nothing_else(
    api_world: World, http: httpx.AsyncClient, server: Any
) -> None:
    w = api_world
    mine = await ask_for(w, w.human)
    other = await ask_for(w, w.human)
    link = await mint(w, mine, w.human)
    # The form can't be pointed at another ask.
    refused = await send(http, link.secret, {"askId": other, "action": "decline", "reason": "x"})
    assert refused.status_code == 403
    assert (await state(w, other)).is_open and (await state(w, mine)).is_open
    # The secret signs nothing else in: not as a token, not as a session cookie.
    for headers in (
        {"authorization": f"Bearer {link.secret}"},
        {
            "cookie": f"compass_session={link.secret}",
            "x-compass-csrf": "1",
            "origin": f"http://127.0.0.1:{server.http_port}",
        },
    ):
        for service, method in (
            ("CommsService", "ListChannels"),
            ("CommsService", "GetAskMessage"),
            ("IdentityService", "WhoAmI"),
        ):
            call = await http.post(
                f"/compass.v1.{service}/{method}",
                json={"askId": other} if method == "GetAskMessage" else {},
                headers=headers,
            )
            assert call.status_code == 401, (headers, method, call.text)
    # The page shows nothing of the other ask nor of the channel's messages.
    page = await http.get(f"/a/{link.secret}")
    assert other not in page.text and w.channel.name not in page.text


async def test_links_are_minted_only_for_a_person_the_ask_lets_answer(api_world: World) -> None:
    w = api_world
    named_ask = await ask_for(w, w.human)
    # grace is not named (and not in the channel).
    with pytest.raises(PermissionDenied):
        await mint(w, named_ask, w.other_human)
    with pytest.raises(Exception, match="no such person"):
        await mint(w, named_ask, w.agent)
    # An ask naming nobody: a person in its channel (the one notified), not another.
    anyone = await ask_for(w)
    await mint(w, anyone, w.human)
    with pytest.raises(PermissionDenied):
        await mint(w, anyone, w.other_human)
    with pytest.raises(InvalidArgument):
        await mint(w, anyone, w.human, lifetime=datetime.timedelta(days=365))
    await w.store.cancel_ask(w.agent, anyone)
    with pytest.raises(FailedPrecondition):
        await mint(w, anyone, w.human)


async def test_a_revoked_or_expired_link_opens_nothing(
    api_world: World, http: httpx.AsyncClient
) -> None:
    from compass_server.store.types import Operator

    w = api_world
    ask_id = await ask_for(w, w.human)
    revoked = await mint(w, ask_id, w.human)
    short = await mint(w, ask_id, w.human, lifetime=datetime.timedelta(seconds=1))
    await w.store.revoke_ask_link(Operator(w.workspace_id), revoked.link.link_id)
    page = await http.get(f"/a/{revoked.secret}")
    assert page.status_code == 410 and "This link was revoked" in page.text
    await asyncio.sleep(1.2)
    page = await http.get(f"/a/{short.secret}")
    assert page.status_code == 410 and "This link has expired" in page.text
    post = await send(http, short.secret, {"askId": ask_id, "action": "decline"})
    assert post.status_code == 410 and "expired" in post.json()["message"]
    unknown = await http.get("/a/cpl_nothing-here")
    assert unknown.status_code == 404 and "This link opens nothing" in unknown.text
    assert (await state(w, ask_id)).is_open


async def test_webhook_payloads_carry_no_link(api_world: World) -> None:
    from compass_server.webhooks.payloads import ask_data, ask_link

    w = api_world
    ask_id = await ask_for(w, w.human)
    link = await mint(w, ask_id, w.human)
    _, ask = await w.store.get_ask(w.human, ask_id)
    data = str(ask_data(ask, "open", ask_link("http://compass.example", ask_id)))
    # A receiver gets the page's address of the ask, which asks whoever opens it to sign in.
    assert f"http://compass.example/#/ask/{ask_id}" in data
    assert link.secret not in data and not re.search(r"/a/cpl_", data)


@pytest.mark.parametrize(
    ("where", "typed", "char"),
    [
        ("db", "an escape \x1b[31m red", "U+001B"),
        ("langs", "a bell \x07", "U+0007"),
        ("db", "DEL \x7f", "U+007F"),
        ("db", "a C1 control \x85", "U+0085"),
        ("langs", "a NUL \x00 here", "U+0000"),
        ("reason", "not \x1b]0;mine\x07", "U+001B"),
        ("reason", "a NUL \x00", "U+0000"),
    ],
)
async def test_the_link_takes_text_by_the_rule_every_surface_keeps(
    api_world: World, http: httpx.AsyncClient, client: Any, where: str, typed: str, char: str
) -> None:
    """The link refuses what the Connect API refuses, with the same sentence:
    nothing is recorded."""
    from tests.servers import CallError

    w = api_world
    ask_id = await ask_for(w, w.human)
    link = await mint(w, ask_id, w.human)

    def body(words: str) -> dict[str, Any]:
        if where == "reason":
            return {"askId": ask_id, "action": "decline", "reason": words}
        given = {"db": ([], ""), "langs": ([], "")}
        given[where] = ([], words)
        return {"askId": ask_id, "action": "answer", "answers": answers(**given)}

    refused = await send(http, link.secret, body(typed))
    assert refused.status_code == 400, refused.text
    rule = f"has a control character ({char}) at position {typed.index(chr(int(char[2:], 16)))}"
    said = refused.json()["message"]
    assert refused.json()["code"] == "invalid_argument"
    assert rule in said, said
    assert "text takes tab, line feed and carriage return, no other" in said
    assert "Incident" not in said
    assert (await state(w, ask_id)).is_open
    # The same text through the API is refused by the same rule.
    with pytest.raises(CallError) as info:
        if where == "reason":
            await client.call(
                "DeclineAsk",
                pb.DeclineAskRequest(ask_id=ask_id, reason=typed),
                w.tokens[w.human.account_id],
            )
        else:
            await client.call(
                "RespondToAsk",
                pb.RespondToAskRequest(
                    ask_id=ask_id,
                    answers=[
                        pb.AskQuestionAnswer(question_id="db", custom_text=typed),
                        pb.AskQuestionAnswer(question_id="langs"),
                    ],
                ),
                w.tokens[w.human.account_id],
            )
    assert info.value.code == "invalid_argument" and rule in info.value.message
    # Line breaks and tabs are text.
    done = await send(http, link.secret, body("two\nlines\tand a tab"))
    assert done.status_code == 200, done.text
    ask = await state(w, ask_id)
    assert ask.ending is not None
    kept = (
        ask.ending.reason
        if where == "reason"
        else ask.questions[0 if where == "db" else 1].custom_text
    )
    assert kept == "two\nlines\tand a tab"


async def test_bad_json_to_the_link_is_a_clear_4xx_and_records_nothing(
    api_world: World, http: httpx.AsyncClient
) -> None:
    w = api_world
    ask_id = await ask_for(w, w.human)
    link = await mint(w, ask_id, w.human)
    url = f"/a/{link.secret}"
    for content, kind, status in [
        (b"ask_id=x&action=answer", "application/x-www-form-urlencoded", 415),
        (b"{", "application/json", 400),
        (b"[]", "application/json", 400),
        (b'{"askId": "%s", "action": "shout"}' % ask_id.encode(), "application/json", 400),
        (b'{"askId": "%s", "action": "answer"}' % ask_id.encode(), "application/json", 400),
        (
            b'{"askId": "%s", "action": "answer", "answers": [{"questionId": 3}]}'
            % ask_id.encode(),
            "application/json",
            400,
        ),
        (
            b'{"askId": "%s", "action": "answer", "answers": [{"questionId": "db"}]}'
            % ask_id.encode(),
            "application/json",
            400,
        ),
        (
            b'{"askId": "%s", "action": "decline", "tap": 1}' % ask_id.encode(),
            "application/json",
            400,
        ),
        (
            b'{"askId": "%s", "action": "decline", "reason": 5}' % ask_id.encode(),
            "application/json",
            400,
        ),
        (b"\xff\xfe", "application/json", 400),
    ]:
        res = await http.post(url, content=content, headers={"content-type": kind})
        assert res.status_code == status, (content, res.text)
        assert res.json()["message"] and "Traceback" not in res.text
    too_big = await http.post(
        url, content=b" " * (300 * 1024), headers={"content-type": "application/json"}
    )
    assert too_big.status_code == 413
    assert (await state(w, ask_id)).is_open


def cookie_of(secret: str) -> dict[str, str]:
    return {"cookie": f"compass_session={secret}"}


async def test_the_link_says_whose_answer_it_records(
    api_world: World, http: httpx.AsyncClient
) -> None:
    w = api_world
    ask_id = await ask_for(w, w.human)
    link = await mint(w, ask_id, w.human)
    page = await http.get(f"/a/{link.secret}")
    assert page.status_code == 200
    assert "Your answer is recorded as ada." in page.text
    assert page_data(page.text)["answerer"]["handle"] == "ada"


async def test_a_link_in_another_person_s_browser_answers_nothing_and_says_so(
    api_world: World, http: httpx.AsyncClient
) -> None:
    from tests.test_people_sessions import session_for

    w = api_world
    ask_id = await ask_for(w, w.human)
    link = await mint(w, ask_id, w.human)
    graces = await session_for(w.store, w, w.other_human)
    shown = await http.get(f"/a/{link.secret}", headers=cookie_of(graces))
    assert shown.status_code == 200, shown.text
    text = html.unescape(shown.text)
    assert "This link answers as ada" in text
    assert "This browser is signed in to Compass as grace" in text
    assert f'href="/#/ask/{ask_id}"' in text and "Open the ask as grace" in text
    assert "link-data" not in text and "Which database?" in text
    # Nor does its page's read of the ask, from that browser.
    read = await http.get(
        f"/a/{link.secret}", headers={**cookie_of(graces), "accept": "application/json"}
    )
    assert read.status_code == 403 and read.json()["code"] == "permission_denied"
    # Its answer, sent from that browser all the same, answers nothing.
    body = {"askId": ask_id, "action": "answer", "answers": answers(db=["pg"], langs=[])}
    refused = await send(http, link.secret, body, headers=cookie_of(graces))
    assert refused.status_code == 403, refused.text
    said = refused.json()["message"]
    assert "Nothing was recorded" in said and "signed in to Compass as grace" in said
    declined = await send(
        http, link.secret, {"askId": ask_id, "action": "decline"}, headers=cookie_of(graces)
    )
    assert declined.status_code == 403
    assert (await state(w, ask_id)).is_open

    # The link's own person, signed in or not, or a session that has ended: it answers.
    adas = await session_for(w.store, w, w.human)
    for headers in (cookie_of(adas), cookie_of("cs_garbage"), {}):
        page = await http.get(f"/a/{link.secret}", headers=headers)
        assert "Your answer is recorded as ada." in page.text and "link-data" in page.text
    done = await send(http, link.secret, body, headers=cookie_of(adas))
    assert done.status_code == 200 and done.json()["message"] == "Your answer was recorded."
    ask = await state(w, ask_id)
    assert ask.ending is not None and ask.ending.actor_id == w.human.account_id


async def test_in_another_person_s_browser_the_link_opens_the_ask_for_them(
    api_world: World, browser: Any, server: Any
) -> None:
    from playwright.async_api import expect

    from tests.browser import ask_block, new_tab, question
    from tests.test_people_sessions import session_for

    w = api_world
    both = await w.store.create_channel(
        w.human, "both", "", [w.agent.account_id, w.other_human.account_id]
    )
    message = await w.post_ask(w.agent, two_question_ask(), channel=both)
    ask_id = next(b.ask_id for b in message.blocks if isinstance(b, Ask))
    link = await mint(w, ask_id, w.human)
    app = f"http://127.0.0.1:{server.http_port}"
    graces = await session_for(w.store, w, w.other_human)
    async with new_tab(browser, server) as tab:
        await tab.context.add_cookies(
            [{"name": "compass_session", "value": graces, "url": app, "httpOnly": True}]
        )
        await tab.goto(f"/a/{link.secret}")
        await expect(tab.get_by_role("heading")).to_have_text("This link is ada's")
        await expect(tab.get_by_role("button", name="Submit")).to_have_count(0)
        await tab.get_by_role("link", name="Open the ask as grace").click()
        form = ask_block(tab, ask_id)
        await question(form, "db").get_by_label("MySQL").check()
        await form.get_by_role("button", name="Submit answers").click()
        await expect(form.get_by_role("status")).to_contain_text("Answered by grace")
    ask = await state(w, ask_id)
    assert ask.ending is not None and ask.ending.actor_id == w.other_human.account_id
