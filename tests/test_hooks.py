"""Claude Code's and Codex's hooks, answered through Compass: the recorded
hook inputs (tests/hooks/) posted to a real server's /hooks/ endpoints, the
asks answered over the API, and the decision checked byte for byte against
the harness's documented output."""

from __future__ import annotations

import asyncio
import json
import pathlib
import re
from collections.abc import Awaitable, Callable
from typing import Any

import httpx
import pytest

from compass_server.hooks import policy as hook_policy
from compass_server.store.hooks import HookStore
from compass_server.store.types import Actor, Answer, Ask, EndingKind, Operator
from tests.world import World

pytestmark = pytest.mark.timeout(120)

FIXTURES = pathlib.Path(__file__).parent / "hooks"
PERMISSION = json.loads((FIXTURES / "claude-code-permission-request.json").read_text())
QUESTIONS = json.loads((FIXTURES / "claude-code-ask-user-question.json").read_text())
CODEX = json.loads((FIXTURES / "codex-permission-request.json").read_text())
NOTIFY = json.loads((FIXTURES / "codex-notify.json").read_text())

ALLOWED = (
    b'{"hookSpecificOutput":{"hookEventName":"PermissionRequest","decision":{"behavior":"allow"}}}'
)


def denied(message: str) -> bytes:
    return (
        b'{"hookSpecificOutput":{"hookEventName":"PermissionRequest","decision":'
        b'{"behavior":"deny","message":' + json.dumps(message, ensure_ascii=False).encode() + b"}}}"
    )


async def hook_token(w: World, policy: str = "") -> str:
    hooks = HookStore(w.store.db, w.store.admin)
    issued, _ = await hooks.create_hook_token(
        Operator(w.workspace_id),
        w.agent.account_id,
        w.channel.channel_id,
        hook_policy.parse(policy),
    )
    return issued.secret


async def until(check: Callable[[], Awaitable[Any]], what: str, wait: float = 30.0) -> Any:
    async with asyncio.timeout(wait):
        while True:
            found = await check()
            if found:
                return found
            await asyncio.sleep(0.05)
    raise AssertionError(what)


async def open_asks(w: World, reader: Actor | None = None) -> list[Ask]:
    page = await w.store.list_messages(reader or w.human, w.channel.channel_id, 200, "")
    return [b for m in page.items for b in m.blocks if isinstance(b, Ask) and b.is_open]


async def the_open_ask(w: World, reader: Actor | None = None) -> Ask:
    asks: list[Ask] = await until(lambda: open_asks(w, reader), "an open ask")
    assert len(asks) == 1, asks
    return asks[0]


def post(
    server: Any,
    token: str,
    body: object,
    harness: str = "claude-code",
    **query: str,
) -> Awaitable[httpx.Response]:
    async def send() -> httpx.Response:
        async with httpx.AsyncClient(timeout=120) as http:
            return await http.post(
                f"http://127.0.0.1:{server.http_port}/hooks/{harness}",
                params=query,
                content=json.dumps(body).encode() if not isinstance(body, bytes) else body,
                headers={"authorization": f"Bearer {token}"},
            )

    return asyncio.ensure_future(send())


async def test_a_permission_request_allowed_from_the_api(server: Any, api_world: World) -> None:
    w = api_world
    token = await hook_token(w)
    held = post(server, token, PERMISSION)
    ask = await the_open_ask(w)
    page = await w.store.list_messages(w.human, w.channel.channel_id, 200, "")
    text = [b.text for m in page.items for b in m.blocks if hasattr(b, "text")]
    assert text == [
        "Claude Code asks to use Bash in /home/ada/repo (session abc123):\n\n"
        "    git push --force origin main\n\nReason: Push the rebased branch"
    ]
    (question,) = ask.questions
    assert question.question == "Allow Bash: git push --force origin main?"
    assert [o.label for o in question.options] == ["Allow", "Always allow this rule", "Deny"]
    assert not held.done()
    await w.store.answer(w.human, ask.ask_id, [Answer("decision", ("allow",))])
    reply = await held
    assert reply.status_code == 200
    assert reply.content == ALLOWED
    assert reply.headers["compass-ask"] == ask.ask_id
    assert reply.headers["compass-receipt"].count(".") == 2
    assert "compass-reason" not in reply.headers


async def test_deny_with_free_text_is_the_reason(server: Any, api_world: World) -> None:
    w = api_world
    token = await hook_token(w)
    held = post(server, token, PERMISSION)
    ask = await the_open_ask(w)
    await w.store.answer(w.human, ask.ask_id, [Answer("decision", ("deny",), "not on main")])
    reply = await held
    assert reply.content == denied("Denied by @ada: not on main")
    # Free text alone denies too.
    held = post(server, token, PERMISSION)
    ask = await the_open_ask(w)
    await w.store.answer(w.human, ask.ask_id, [Answer("decision", (), "use a branch")])
    assert (await held).content == denied("Denied by @ada: use a branch")


async def test_ask_user_question_answers_keyed_by_question_text(
    server: Any, api_world: World
) -> None:
    w = api_world
    token = await hook_token(w)
    held = post(server, token, QUESTIONS)
    ask = await the_open_ask(w)
    assert [q.question for q in ask.questions] == [
        "Which database should the service use?",
        "Which clients ship first?",
    ]
    await w.store.answer(
        w.human,
        ask.ask_id,
        [Answer("1", ("0",)), Answer("2", ("0", "1"), "and a CLI")],
    )
    reply = await held
    expected = {
        "hookSpecificOutput": {
            "hookEventName": "PreToolUse",
            "permissionDecision": "allow",
            "updatedInput": {
                **QUESTIONS["tool_input"],
                "answers": {
                    "Which database should the service use?": "PostgreSQL",
                    "Which clients ship first?": "Python, Go, and a CLI",
                },
            },
        }
    }
    assert reply.content == json.dumps(expected, separators=(",", ":")).encode()


async def test_codex_permission_request_and_notify(server: Any, api_world: World) -> None:
    w = api_world
    token = await hook_token(w)
    held = post(server, token, CODEX, harness="codex")
    ask = await the_open_ask(w)
    await w.store.answer(w.human, ask.ask_id, [Answer("decision", ("deny",), "keep the cache")])
    reply = await held
    assert reply.content == denied("Denied by @ada: keep the cache")
    noted = await post(server, token, NOTIFY, harness="codex")
    assert (noted.status_code, noted.content) == (200, b"")
    page = await w.store.list_messages(w.human, w.channel.channel_id, 200, "")
    notes = [b.text for m in page.items for b in m.blocks if "finished" in getattr(b, "text", "")]
    assert notes == [
        "Codex finished a turn in /home/ada/repo (thread 019a-codex-thread).\n\n"
        "Renamed the build step and updated CI."
    ]


async def test_timeout_withdraws_and_falls_back(server: Any, api_world: World) -> None:
    w = api_world
    token = await hook_token(w)
    # The server answers 5 s (its margin) before the hook's own timeout.
    held = post(server, token, PERMISSION, timeout="6", fallback="deny")
    ask = await the_open_ask(w)
    reply = await held
    assert reply.content == denied("Compass: nobody answered within the hook's 6 s")
    assert reply.headers["compass-reason"] == "nobody answered within the hook's 6 s"
    _, ended = await w.store.get_ask(w.human, ask.ask_id)
    assert ended.ending is not None and ended.ending.kind is EndingKind.WITHDRAWN_BY_AGENT
    # The default fallback is the harness's own prompt: no decision.
    held = post(server, token, PERMISSION, timeout="6")
    reply = await held
    assert reply.content == b'{"systemMessage":"Compass: nobody answered within the hook\'s 6 s"}'


async def test_a_harness_that_hangs_up_withdraws_its_ask(server: Any, api_world: World) -> None:
    w = api_world
    token = await hook_token(w)
    held = post(server, token, PERMISSION)
    ask = await the_open_ask(w)
    held.cancel()

    async def withdrawn() -> bool:
        _, now = await w.store.get_ask(w.human, ask.ask_id)
        return now.ending is not None and now.ending.kind is EndingKind.WITHDRAWN_BY_AGENT

    await until(withdrawn, "the ask withdrawn")


async def test_a_retried_request_makes_one_ask(server: Any, api_world: World) -> None:
    w = api_world
    token = await hook_token(w)
    first = post(server, token, PERMISSION)
    ask = await the_open_ask(w)
    second = post(server, token, PERMISSION)
    await asyncio.sleep(0.5)
    assert [a.ask_id for a in await open_asks(w)] == [ask.ask_id]
    # The first hangs up: the retry still holds the ask open.
    first.cancel()
    await asyncio.sleep(0.5)
    assert [a.ask_id for a in await open_asks(w)] == [ask.ask_id]
    await w.store.answer(w.human, ask.ask_id, [Answer("decision", ("allow",))])
    reply = await second
    assert reply.content == ALLOWED
    assert reply.headers["compass-ask"] == ask.ask_id


async def test_sessions_each_ask_their_own(server: Any, api_world: World) -> None:
    w = api_world
    token = await hook_token(w)
    one = post(server, token, PERMISSION)
    other = post(server, token, {**PERMISSION, "session_id": "def456"})
    asks: list[Ask] = await until(lambda: _at_least(open_asks(w), 2), "two open asks", wait=30)
    assert len(asks) == 2
    await w.store.answer(w.human, asks[0].ask_id, [Answer("decision", ("allow",))])
    await w.store.answer(w.human, asks[1].ask_id, [Answer("decision", ("deny",))])
    replies = {(await one).content, (await other).content}
    assert replies == {ALLOWED, denied("Denied by @ada")}


async def _one_done(held: list[asyncio.Future[httpx.Response]]) -> bool:
    return any(h.done() for h in held)


async def _at_least(found: Awaitable[list[Ask]], n: int) -> list[Ask]:
    asks = await found
    return asks if len(asks) >= n else []


async def test_always_allow_stands_for_the_rule_and_is_revocable(
    server: Any, api_world: World
) -> None:
    w = api_world
    policy = """
[[rules]]
name = "tests"
tool = "Bash"
match = ["npm test*", "pytest*"]
"""
    token = await hook_token(w, policy)
    request = {**PERMISSION, "tool_input": {"command": "npm test"}}
    held = post(server, token, request)
    ask = await the_open_ask(w)
    assert ask.questions[0].question == 'Allow this Bash request under the rule "tests"?'
    await w.store.answer(w.human, ask.ask_id, [Answer("decision", ("always",))])
    assert (await held).content == ALLOWED
    (standing,) = await w.store.list_standing_answers(w.human)
    # The next request under the rule is answered at its post, visibly.
    again = await post(server, token, {**request, "tool_input": {"command": "pytest -x"}})
    assert again.content == ALLOWED
    _, answered = await w.store.get_ask(w.human, again.headers["compass-ask"])
    assert answered.ending is not None
    assert answered.ending.standing_answer_id == standing.standing_answer_id
    # A command the rule doesn't cover still asks; so does one chained on.
    chained = post(server, token, {**request, "tool_input": {"command": "npm test; rm -rf /"}})
    ask = await the_open_ask(w)
    assert ask.questions[0].question == "Allow Bash: npm test; rm -rf /?"
    await w.store.answer(w.human, ask.ask_id, [Answer("decision", ("deny",))])
    assert (await chained).content == denied("Denied by @ada")
    # Revoked, it answers nothing.
    await w.store.revoke_standing_answer(w.human, standing.standing_answer_id)
    held = post(server, token, request)
    ask = await the_open_ask(w)
    await w.store.answer(w.human, ask.ask_id, [Answer("decision", ("deny",), "not now")])
    assert (await held).content == denied("Denied by @ada: not now")


async def test_quiet_reads_never_ask(server: Any, api_world: World) -> None:
    w = api_world
    token = await hook_token(w, '[[rules]]\nname = "reads"\ntool = "Read|Glob|Grep"\nask = false\n')
    reply = await post(
        server, token, {**PERMISSION, "tool_name": "Read", "tool_input": {"file_path": "a.py"}}
    )
    assert (reply.status_code, reply.content) == (200, b"{}")
    assert await open_asks(w) == []


async def test_two_of_the_on_call_group_must_allow(server: Any, api_world: World) -> None:
    w = api_world
    lin = await w.add_account("lin")
    await w.store.add_channel_member(w.human, w.channel.channel_id, w.other_human.account_id)
    await w.store.add_channel_member(w.human, w.channel.channel_id, lin.account_id)
    policy = """
[groups]
on-call = ["ada", "grace", "lin"]

[[rules]]
name = "force push"
tool = "Bash"
match = "git push --force*"
answerers = "@on-call"
quorum = 2
"""
    token = await hook_token(w, policy)
    held = post(server, token, PERMISSION)
    ask = await the_open_ask(w)
    assert ask.quorum == 2
    # Two approvers at once: both votes count, the ask ends once.
    await asyncio.gather(
        w.store.answer(w.human, ask.ask_id, [Answer("decision", ("allow",))]),
        w.store.answer(lin, ask.ask_id, [Answer("decision", ("allow",))]),
    )
    assert (await held).content == ALLOWED
    # One deny among the two answers denies.
    held = post(server, token, PERMISSION)
    ask = await the_open_ask(w)
    await w.store.answer(w.human, ask.ask_id, [Answer("decision", ("allow",))])
    assert not held.done()
    await w.store.answer(w.other_human, ask.ask_id, [Answer("decision", ("deny",), "freeze")])
    assert (await held).content == denied("Denied by @grace: freeze")


async def test_a_hook_token_does_nothing_else(server: Any, api_world: World) -> None:
    w = api_world
    token = await hook_token(w)
    async with httpx.AsyncClient() as http:
        r = await http.post(
            f"http://127.0.0.1:{server.http_port}/compass.v1.CommsService/ListChannels",
            json={},
            headers={"authorization": f"Bearer {token}"},
        )
        assert r.status_code == 403
        assert r.json()["message"] == (
            "a hook token only posts a harness's hook requests "
            "(POST /hooks/claude-code, /hooks/codex)"
        )
        # And an account's token is no hook token.
        r = await http.post(
            f"http://127.0.0.1:{server.http_port}/hooks/claude-code",
            json=PERMISSION,
            headers={"authorization": f"Bearer {w.tokens[w.agent.account_id]}"},
        )
        assert r.status_code == 403
        assert r.json() == {
            "code": "permission_denied",
            "message": "this endpoint takes a hook token (cph_…), made by admin create-hook-token",
        }


async def test_bad_requests_are_4xx_with_a_reason(server: Any, api_world: World) -> None:
    w = api_world
    token = await hook_token(w)
    url = f"http://127.0.0.1:{server.http_port}/hooks"
    auth = {"authorization": f"Bearer {token}"}
    async with httpx.AsyncClient() as http:
        cases: list[tuple[httpx.Response, int, str]] = [
            (
                await http.post(f"{url}/claude-code", content=b"\xff\xfe", headers=auth),
                400,
                "the body is not UTF-8",
            ),
            (
                await http.post(f"{url}/claude-code", content=b"{", headers=auth),
                400,
                "the body is not JSON: Expecting property name enclosed in double quotes",
            ),
            (
                await http.post(
                    f"{url}/claude-code", content=b"[" * 5000 + b"]" * 5000, headers=auth
                ),
                400,
                "the body is nested deeper than 64 levels",
            ),
            (
                await http.post(
                    f"{url}/claude-code", json={**PERMISSION, "cwd": "a\x00b"}, headers=auth
                ),
                400,
                "cwd has a control character (U+0000) at position 1; "
                "text takes tab, line feed and carriage return, no other",
            ),
            (
                await http.post(
                    f"{url}/claude-code",
                    json={**PERMISSION, "hook_event_name": "Stop"},
                    headers=auth,
                ),
                400,
                "Claude Code's 'Stop' hook is not one Compass answers here "
                "(it takes PermissionRequest, PreToolUse)",
            ),
            (
                await http.post(f"{url}/claude-code", json=[], headers=auth),
                400,
                "the body is a JSON object of the harness's hook input",
            ),
            (
                await http.post(
                    f"{url}/claude-code", params={"timeout": "nan"}, json=PERMISSION, headers=auth
                ),
                400,
                "timeout is the hook's timeout in seconds, 1 to 86400 "
                "(the same number as the hook's own timeout setting)",
            ),
            (
                await http.post(
                    f"{url}/claude-code",
                    params={"fallback": "allow"},
                    json=PERMISSION,
                    headers=auth,
                ),
                400,
                "fallback is ask (the harness's own prompt) or deny",
            ),
            (
                await http.post(f"{url}/{'x' * 300}", json=PERMISSION, headers=auth),
                404,
                "no such hook endpoint; there are /hooks/claude-code and /hooks/codex",
            ),
            (await http.get(f"{url}/claude-code", headers=auth), 405, "hooks are POSTed"),
            (
                await http.post(f"{url}/claude-code", json=PERMISSION),
                401,
                "missing authorization: Bearer <token>",
            ),
            (
                await http.post(
                    f"{url}/claude-code",
                    json=PERMISSION,
                    headers={"authorization": "Bearer cph_stale"},
                ),
                401,
                "the token is not valid",
            ),
            (
                await http.post(f"{url}/claude-code", content=b"x" * (2 << 20), headers=auth),
                413,
                "That request is too large.",
            ),
        ]
    for reply, status, message in cases:
        assert (reply.status_code, reply.json()["message"]) == (status, message)
    assert await open_asks(w) == []


async def test_a_hook_token_is_listed_revoked_and_never_rotated(
    server: Any, api_world: World
) -> None:
    from compass_server.store.errors import FailedPrecondition

    w = api_world
    hooks = HookStore(w.store.db, w.store.admin)
    issued, policy = await hooks.create_hook_token(
        Operator(w.workspace_id),
        w.agent.account_id,
        w.channel.channel_id,
        hook_policy.parse('[[rules]]\nname = "reads"\ntool = "Read"\nask = false\n'),
        label="laptop hooks",
    )
    assert [r.name for r in policy.rules] == ["reads"]
    assert issued.secret.startswith("cph_")
    listed = await w.store.admin.list_tokens(
        Operator(w.workspace_id), w.agent.account_id, None, False, 50, ""
    )
    assert "laptop hooks" in [t.label for t in listed.items]
    with pytest.raises(FailedPrecondition, match="is a hook token, which can't be rotated"):
        await w.store.admin.rotate_token(Operator(w.workspace_id), issued.token.token_id)
    await w.store.admin.revoke_token(Operator(w.workspace_id), issued.token.token_id)
    server.auth.forget(issued.token.token_id)
    reply = await post(server, issued.secret, PERMISSION)
    assert (reply.status_code, reply.json()["message"]) == (401, "the token was revoked")


async def test_a_policy_is_checked_when_the_token_is_made(api_world: World) -> None:
    from compass_server.store.errors import InvalidArgument, NotFound

    w = api_world
    hooks = HookStore(w.store.db, w.store.admin)
    bad = {
        "[[rules]]\nname = 1\n": "rules[0].name is 1 to 80 characters",
        "[[rules]]\nname = 'a'\nanswerers = ['ada']\nquorum = 2\n": (
            "rules[0].quorum is 2; a quorum is 1 to the number of answerers the rule names (1)"
        ),
        "[[rules]]\nname = 'a'\nanswerers = ['@oncall']\n": (
            "rules[0].answerers names the group @oncall, which [groups] lacks"
        ),
        "[[rules]]\nname = 'a'\nmatchh = 'x'\n": "rules[0] has no setting 'matchh'",
        "rules = 3": "rules is a list of [[rules]] tables",
        "[x": "the policy is not TOML",
        "[[rules]]\nname = 'a'\ntool = 'B(a'\n": "rules[0].tool is * or tool names",
    }
    for text, why in bad.items():
        with pytest.raises(InvalidArgument, match=re.escape(why)):
            hook_policy.parse(text)
    with pytest.raises(InvalidArgument, match="the policy names @nobody, who is no active person"):
        await hooks.create_hook_token(
            Operator(w.workspace_id),
            w.agent.account_id,
            w.channel.channel_id,
            hook_policy.parse("[[rules]]\nname = 'a'\nanswerers = ['nobody']\n"),
        )
    with pytest.raises(NotFound, match="no agent"):
        await hooks.create_hook_token(
            Operator(w.workspace_id),
            w.human.account_id,
            w.channel.channel_id,
            hook_policy.parse(""),
        )
    other = await w.store.create_channel(w.human, "elsewhere", "", [])
    with pytest.raises(Exception, match="takes no part in channel"):
        await hooks.create_hook_token(
            Operator(w.workspace_id), w.agent.account_id, other.channel_id, hook_policy.parse("")
        )


async def test_held_requests_are_bounded_per_token_and_in_all(
    database_url: str, tmp_path: pathlib.Path
) -> None:
    from tests.conftest import running_server

    async with running_server(
        database_url, tmp_path, hooks_held_per_token=2, hooks_held_requests=3
    ) as srv:
        w = await World.create(srv.store)
        one, two = await hook_token(w), await hook_token(w)
        held = [post(srv, one, {**PERMISSION, "session_id": f"s{i}"}) for i in range(2)]
        await until(lambda: _at_least(open_asks(w), 2), "two held requests")
        refused = await post(srv, one, {**PERMISSION, "session_id": "s9"})
        assert (refused.status_code, refused.json()) == (
            429,
            {
                "code": "resource_exhausted",
                "message": "this hook token has 2 requests waiting on answers, the most it may; "
                "answer or end one first",
            },
        )
        held.append(post(srv, two, {**PERMISSION, "session_id": "t1"}))
        await until(lambda: _at_least(open_asks(w), 3), "three held requests")
        refused = await post(srv, two, {**PERMISSION, "session_id": "t2"})
        assert refused.status_code == 429
        assert refused.json()["message"] == (
            "this server holds 3 hook requests waiting on answers, the most it may; "
            "try again shortly"
        )
        # Nothing was asked for the refused ones; an answer frees a place.
        asks = await open_asks(w)
        assert len(asks) == 3
        await w.store.answer(w.human, asks[0].ask_id, [Answer("decision", ("allow",))])
        await until(lambda: _one_done(held), "the answered request's reply")
        freed = post(srv, two, {**PERMISSION, "session_id": "t3"})
        await until(lambda: _at_least(open_asks(w), 3), "the freed place taken")
        for task in [*held, freed]:
            task.cancel()


async def test_a_pre_tool_use_hook_on_another_tool(server: Any, api_world: World) -> None:
    w = api_world
    token = await hook_token(w)
    request = {
        **QUESTIONS,
        "tool_name": "Bash",
        "tool_input": {"command": "make deploy", "description": "Ship it"},
    }
    held = post(server, token, request)
    ask = await the_open_ask(w)
    await w.store.answer(w.human, ask.ask_id, [Answer("decision", ("allow",))])
    assert (await held).content == (
        b'{"hookSpecificOutput":{"hookEventName":"PreToolUse","permissionDecision":"allow"}}'
    )
    held = post(server, token, request, fallback="deny", timeout="6")
    reply = await held
    assert reply.content == (
        b'{"hookSpecificOutput":{"hookEventName":"PreToolUse","permissionDecision":"deny",'
        b'"permissionDecisionReason":"Compass: nobody answered within the hook\'s 6 s"}}'
    )
