"""compass-mcp as an MCP client sees it: the SDK's own client launches it
over stdio (or reaches it over streamable HTTP), against the real server; a
person answers over gRPC."""

from __future__ import annotations

import asyncio
import contextlib
import importlib.metadata
import json
import os
import pathlib
import re
import sys
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from typing import IO, Any

import httpx
import pytest
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError
from mcp_types import CallToolResult, TextContent

from compass.v1 import comms_pb2 as pb
from compass_server.relay import gateway
from compass_server.store.types import Ask, EventKind
from tests.relay_client import runner_for
from tests.servers import GrpcClient
from tests.tcp_proxy import TcpProxy
from tests.world import World

MCP = pathlib.Path(sys.executable).parent / "compass-mcp"
TOOLS = {
    "ask",
    "check_ask",
    "cancel_ask",
    "post_message",
    "read_channel",
    "list_channels",
    "set_status",
    "inbox_post",
    "inbox_reply",
    "inbox_close",
    "spawn_agent",
}
QUESTIONS: list[dict[str, Any]] = [
    {
        "question": "Which database should the service use?",
        "header": "Storage",
        "options": [
            {"label": "PostgreSQL", "description": "already deployed"},
            {"label": "SQLite", "description": "one file"},
        ],
        "multiSelect": False,
    },
    {
        "question": "Which clients ship first?",
        "header": "Clients",
        "options": [{"label": "Python"}, {"label": "Go"}, {"label": "TypeScript"}],
        "multiSelect": True,
    },
]
POSTED = re.compile(r"Posted ask (\S+) in channel")


# A 1×1 PNG.
PNG = bytes.fromhex(
    "89504e470d0a1a0a0000000d4948445200000001000000010806000000"
    "1f15c4890000000d49444154789c63000100000500010d0a2db40000000049454e44ae426082"
)


async def inbox_thread(http_port: int, w: World, key: str) -> list[dict[str, Any]]:
    """The agent's inbox item under `key`, as ada reads it over Connect JSON."""
    headers = {"authorization": f"Bearer {w.tokens[w.human.account_id]}"}
    url = f"http://127.0.0.1:{http_port}/compass.v1.InboxService"
    async with httpx.AsyncClient(timeout=30, headers=headers) as http:
        listed = (await http.post(f"{url}/ListInboxItems", json={})).json()
        [item] = [i for i in listed.get("items", []) if i["key"] == key]
        got = (await http.post(f"{url}/GetInboxItem", json={"itemId": item["itemId"]})).json()
    return got["thread"]  # type: ignore[no-any-return]


def text_of(result: CallToolResult) -> str:
    return "\n".join(c.text for c in result.content if isinstance(c, TextContent))


@dataclass
class Mcp:
    """One compass-mcp process as its client sees it, and the world around it."""

    session: ClientSession
    w: World
    grpc: GrpcClient
    log: pathlib.Path
    progress: list[str] = field(default_factory=list)

    async def call(self, name: str, args: dict[str, Any], **kw: Any) -> CallToolResult:
        return await self.session.call_tool(name, args, **kw)

    def ask_task(self, args: dict[str, Any], **kw: Any) -> asyncio.Task[CallToolResult]:
        async def progress(done: float, total: float | None, message: str | None) -> None:
            self.progress.append(message or "")

        return asyncio.ensure_future(
            self.session.call_tool("ask", args, progress_callback=progress, **kw)
        )

    async def posted_ask_id(self) -> str:
        """The ask id, as the first progress message tells the client."""
        async with asyncio.timeout(30):
            while True:
                for message in self.progress:
                    found = POSTED.search(message)
                    if found:
                        return found.group(1)
                await asyncio.sleep(0.02)

    async def as_ada(self, method: str, request: Any) -> Any:
        return await self.grpc.call(method, request, self.w.tokens[self.w.human.account_id])

    async def ada_answers(self, ask_id: str) -> None:
        await self.as_ada(
            "RespondToAsk",
            pb.RespondToAskRequest(
                ask_id=ask_id,
                answers=[
                    pb.AskQuestionAnswer(question_id="1", chosen_option_ids=["0"]),
                    pb.AskQuestionAnswer(
                        question_id="2", chosen_option_ids=["0", "1"], custom_text="and a CLI"
                    ),
                ],
            ),
        )

    async def scouts_state(self) -> int:
        presences = await self.as_ada("GetPresence", pb.GetPresenceRequest())
        [scout] = [p for p in presences.presences if p.account_id == str(self.w.agent.account_id)]
        return int(scout.state)

    async def ada_reads_ask(self, ask_id: str) -> pb.Ask:
        listed = await self.as_ada(
            "ListMessages", pb.ListMessagesRequest(channel_id=str(self.w.channel.channel_id))
        )
        for message in listed.messages:
            for block in message.blocks:
                if block.HasField("ask") and block.ask.ask_id == ask_id:
                    return block.ask
        raise AssertionError(f"ada sees no ask {ask_id}")


def env_for(grpc_port: int, token: str, w: World, **extra: str) -> dict[str, str]:
    return {
        **os.environ,
        "COMPASS_URL": f"127.0.0.1:{grpc_port}",
        "COMPASS_RUNNER_TOKEN": token,
        "COMPASS_AGENT_ID": str(w.agent.account_id),
        "COMPASS_CHANNEL_ID": str(w.channel.channel_id),
        "COMPASS_LOG_LEVEL": "INFO",
        **extra,
    }


@contextlib.asynccontextmanager
async def over_stdio(
    env: dict[str, str], errlog: IO[str], *args: str
) -> AsyncIterator[ClientSession]:
    params = StdioServerParameters(command=str(MCP), args=list(args), env=env)
    async with stdio_client(params, errlog=errlog) as (read, write):
        async with ClientSession(read, write) as session:
            await session.initialize()
            yield session


@contextlib.asynccontextmanager
async def over_http(
    env: dict[str, str], errlog: IO[str], *args: str
) -> AsyncIterator[ClientSession]:
    proc = await asyncio.create_subprocess_exec(
        str(MCP),
        "--http",
        "127.0.0.1:0",
        *args,
        env=env,
        stdout=asyncio.subprocess.PIPE,
        stderr=errlog,
    )
    try:
        assert proc.stdout is not None
        line = await asyncio.wait_for(proc.stdout.readline(), 30)
        url = json.loads(line)["url"]
        async with streamable_http_client(url) as (read, write):
            async with ClientSession(read, write) as session:
                await session.initialize()
                yield session
    finally:
        if proc.returncode is None:
            proc.terminate()
        await asyncio.wait_for(proc.wait(), 30)


Transport = Callable[..., contextlib.AbstractAsyncContextManager[ClientSession]]
TRANSPORTS: dict[str, Transport] = {"stdio": over_stdio, "http": over_http}


@contextlib.asynccontextmanager
async def mcp_for(
    server: Any,
    w: World,
    tmp_path: pathlib.Path,
    transport: str = "stdio",
    *,
    grpc_port: int | None = None,
    token: str | None = None,
    args: tuple[str, ...] = (),
    **env: str,
) -> AsyncIterator[Mcp]:
    token = token or await runner_for(w)
    log = tmp_path / f"compass-mcp-{transport}.log"
    grpc = GrpcClient(server.grpc_port)
    try:
        with log.open("w") as errlog:
            port = grpc_port or server.grpc_port
            async with TRANSPORTS[transport](env_for(port, token, w, **env), errlog, *args) as s:
                yield Mcp(s, w, grpc, log)
    finally:
        await grpc.close()


# --- the tool list --------------------------------------------------------------------


@pytest.mark.parametrize("transport", ["stdio", "http"])
async def test_the_tools_and_their_schemas(
    server: Any, api_world: World, tmp_path: pathlib.Path, transport: str
) -> None:
    async with mcp_for(server, api_world, tmp_path, transport) as m:
        listed = await m.session.list_tools()
    tools = {t.name: t for t in listed.tools}
    assert set(tools) == TOOLS
    # No tool answers an ask.
    assert not [n for n in tools if "answer" in n or "respond" in n]
    for tool in tools.values():
        assert tool.description and len(tool.description) > 40, tool.name
        assert tool.input_schema["type"] == "object"
        assert tool.input_schema["additionalProperties"] is False
    ask = tools["ask"].input_schema
    assert ask["required"] == ["questions"]  # the channel defaults to COMPASS_CHANNEL_ID
    question = ask["properties"]["questions"]["items"]
    assert set(question["properties"]) == {"question", "header", "options", "multiSelect"}
    assert question["required"] == ["question", "options"]
    assert set(question["properties"]["options"]["items"]["properties"]) >= {"label", "description"}
    assert ask["properties"]["wait_seconds"]["maximum"] == 3600
    assert {"deadline_seconds", "deadline", "answerer_account_ids"} <= set(ask["properties"])
    for inbox in ("inbox_post", "inbox_reply"):
        pictures = tools[inbox].input_schema["properties"]["pictures"]
        assert pictures["type"] == "array" and pictures["maxItems"] == 10
    assert tools["check_ask"].input_schema["required"] == ["ask_id"]
    # Every tool may act as a sub-agent spawned here.
    for tool in tools.values():
        assert tool.input_schema["properties"]["agent"]["type"] == "string", tool.name
    assert tools["spawn_agent"].input_schema["required"] == ["handle"]
    assert "delivery lane" not in " ".join(t.description or "" for t in tools.values())


@pytest.mark.parametrize("transport", ["stdio", "http"])
async def test_every_tool_carries_its_label_and_approval_hints(
    server: Any, api_world: World, tmp_path: pathlib.Path, transport: str
) -> None:
    async with mcp_for(server, api_world, tmp_path, transport) as m:
        listed = await m.session.list_tools()
    hints = {}
    for tool in listed.tools:
        a = tool.annotations
        assert a is not None and a.title and tool.title == a.title, tool.name
        hints[tool.name] = (a.title, a.read_only_hint, a.destructive_hint, a.idempotent_hint)
    assert hints == {
        "ask": ("Ask people and wait for the answer", False, False, False),
        "check_ask": ("Read channel ask", True, False, True),
        "cancel_ask": ("Withdraw channel ask", False, True, True),
        "post_message": ("Post channel message", False, False, False),
        "read_channel": ("Read channel messages", True, False, True),
        "list_channels": ("List channels", True, False, True),
        "set_status": ("Set own status", False, False, True),
        "inbox_post": ("Post to inbox", False, True, False),
        "inbox_reply": ("Reply in inbox", False, False, False),
        "inbox_close": ("Withdraw inbox ask", False, True, True),
        "spawn_agent": ("Spawn sub-agent", False, False, False),
    }


async def test_the_server_reports_its_version(
    server: Any, api_world: World, tmp_path: pathlib.Path
) -> None:
    params = StdioServerParameters(
        command=str(MCP), env=env_for(server.grpc_port, await runner_for(api_world), api_world)
    )
    with (tmp_path / "mcp.log").open("w") as errlog:
        async with stdio_client(params, errlog=errlog) as (read, write):
            async with ClientSession(read, write) as session:
                started = await session.initialize()
    assert started.server_info.name == "compass"
    assert started.server_info.version == importlib.metadata.version("compass-agentkit")


# --- ask and its endings ------------------------------------------------------------------


@pytest.mark.parametrize("transport", ["stdio", "http"])
async def test_ask_returns_the_answer_a_person_gives(
    server: Any, api_world: World, tmp_path: pathlib.Path, transport: str
) -> None:
    async with mcp_for(server, api_world, tmp_path, transport) as m:
        waiting = m.ask_task({"questions": QUESTIONS, "text": "Two decisions first."})
        ask_id = await m.posted_ask_id()
        assert not waiting.done()
        assert await m.scouts_state() == pb.PRESENCE_STATE_WAITING
        await m.ada_answers(ask_id)
        result = await asyncio.wait_for(waiting, 30)
        state_after = await m.scouts_state()

    assert not result.is_error, text_of(result)
    assert text_of(result) == (
        f"Ask {ask_id} was answered:\n"
        "- Which database should the service use? → PostgreSQL\n"
        "- Which clients ship first? → Python, Go; other: and a CLI"
    )
    assert result.structured_content is not None
    assert result.structured_content["state"] == "answered"
    assert [a["selected_options"] for a in result.structured_content["answers"]] == [
        ["PostgreSQL"],
        ["Python", "Go"],
    ]
    assert state_after != pb.PRESENCE_STATE_WAITING
    assert "If this call stops first, the ask stays open: check_ask or cancel_ask" in m.progress[0]


async def test_cancel_ask_from_a_second_call_ends_the_waiting_ask_withdrawn(
    server: Any, api_world: World, tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The lane never carries an agent's own withdrawal back to it: the
    # waiting ask must learn of it in process.
    hears = gateway.hears

    def without_own_withdrawals(agent_id: Any, channels: Any) -> Any:
        visible = hears(agent_id, channels)

        def narrowed(event: Any) -> bool:
            message = event.message
            if event.kind is EventKind.MESSAGE_UPDATED and message is not None:
                if any(isinstance(b, Ask) and b.cancelled for b in message.blocks):
                    return False
            return visible(event)

        return narrowed

    monkeypatch.setattr(gateway, "hears", without_own_withdrawals)
    async with mcp_for(server, api_world, tmp_path) as m:
        waiting = m.ask_task({"questions": QUESTIONS})
        ask_id = await m.posted_ask_id()
        cancelled = await m.call("cancel_ask", {"ask_id": ask_id})
        result = await asyncio.wait_for(waiting, 30)
        seen = await m.ada_reads_ask(ask_id)

    assert text_of(cancelled) == f"Withdrew ask {ask_id}; no answer will arrive."
    assert not result.is_error
    assert text_of(result) == f"Ask {ask_id} was withdrawn; it takes no answer."
    assert result.structured_content == {"ask_id": ask_id, "state": "withdrawn"}
    assert seen.cancelled and not seen.answered


async def test_a_person_answers_while_the_relay_connection_is_cut(
    server: Any, api_world: World, tmp_path: pathlib.Path
) -> None:
    proxy = await TcpProxy(server.grpc_port).start()
    try:
        async with mcp_for(server, api_world, tmp_path, grpc_port=proxy.port) as m:
            waiting = m.ask_task({"questions": QUESTIONS})
            ask_id = await m.posted_ask_id()
            await proxy.cut()
            # The person answers while compass-mcp can't reach Compass.
            await m.ada_answers(ask_id)
            await asyncio.sleep(1.0)
            assert not waiting.done()
            await proxy.restore()
            result = await asyncio.wait_for(waiting, 60)
    finally:
        await proxy.close()
    assert not result.is_error, text_of(result)
    assert text_of(result).startswith(f"Ask {ask_id} was answered:")
    assert "reconnecting in" in m.log.read_text()
    assert proxy.connections >= 2


async def test_a_client_that_stops_waiting_leaves_the_ask_open_and_findable(
    server: Any, api_world: World, tmp_path: pathlib.Path
) -> None:
    async with mcp_for(server, api_world, tmp_path) as m:
        waiting = m.ask_task({"questions": QUESTIONS}, read_timeout_seconds=2)
        with pytest.raises(MCPError):
            await asyncio.wait_for(waiting, 30)
        ask_id = await m.posted_ask_id()
        opened = await m.call("check_ask", {"ask_id": ask_id})
        assert (await m.ada_reads_ask(ask_id)).answered is False
        assert await m.scouts_state() == pb.PRESENCE_STATE_WAITING
        await m.ada_answers(ask_id)
        answered = await m.call("check_ask", {"ask_id": ask_id})
        # compass-mcp is still serving.
        assert len((await m.session.list_tools()).tools) == len(TOOLS)

    assert text_of(opened).startswith(f"Ask {ask_id} is open: nobody has answered it yet.")
    assert opened.structured_content == {"ask_id": ask_id, "state": "open"}
    assert text_of(answered).startswith(f"Ask {ask_id} was answered:")
    assert "- Which database should the service use? → PostgreSQL" in text_of(answered)


async def test_an_ask_that_waits_longer_than_wait_seconds_returns_still_open(
    server: Any, api_world: World, tmp_path: pathlib.Path
) -> None:
    async with mcp_for(server, api_world, tmp_path) as m:
        result = await m.call("ask", {"questions": QUESTIONS, "wait_seconds": 1})
        found = re.search(r"Ask (\S+) is still open", text_of(result))
        assert found, text_of(result)
        assert not (await m.ada_reads_ask(found.group(1))).cancelled
    assert not result.is_error
    assert "check_ask" in text_of(result) and "cancel_ask" in text_of(result)
    assert result.structured_content == {"ask_id": found.group(1), "state": "open"}


async def ask_ended_by(
    m: Mcp, end: Callable[[str], Awaitable[Any]], **args: Any
) -> tuple[str, CallToolResult]:
    m.progress.clear()  # so the ask id read is this ask's
    waiting = m.ask_task({"questions": QUESTIONS, **args})
    ask_id = await m.posted_ask_id()
    await end(ask_id)
    return ask_id, await asyncio.wait_for(waiting, 30)


async def test_ask_returns_every_other_ending_in_plain_words(
    server: Any, api_world: World, tmp_path: pathlib.Path
) -> None:
    ada = str(api_world.human.account_id)
    async with mcp_for(server, api_world, tmp_path) as m:

        async def decline(ask_id: str) -> None:
            await m.as_ada(
                "DeclineAsk", pb.DeclineAskRequest(ask_id=ask_id, reason="not before the audit")
            )

        async def withdraw(ask_id: str) -> None:
            await m.as_ada("WithdrawAsk", pb.WithdrawAskRequest(ask_id=ask_id))

        async def wait(ask_id: str) -> None:
            del ask_id  # the deadline ends it

        declined_id, declined = await ask_ended_by(m, decline, answerer_account_ids=[ada])
        asked_of = await m.ada_reads_ask(declined_id)
        withdrawn_id, withdrawn = await ask_ended_by(m, withdraw)
        expired_id, expired = await ask_ended_by(m, wait, deadline_seconds=1)
        state_after = await m.scouts_state()
        late = await m.call("cancel_ask", {"ask_id": declined_id})
        checked = await m.call("check_ask", {"ask_id": expired_id})

    assert list(asked_of.answerer_handles) == ["ada"]
    assert not declined.is_error, text_of(declined)
    assert text_of(declined) == (
        f'Ask {declined_id} was declined by @ada: "not before the audit". Nobody answered '
        "it; it takes no answer."
    )
    assert declined.structured_content is not None
    assert declined.structured_content["state"] == "declined"
    assert declined.structured_content["reason"] == "not before the audit"
    assert declined.structured_content["ended_by"] == "ada"
    assert text_of(withdrawn) == (
        f"Ask {withdrawn_id} was withdrawn by @ada, the owner of the agent that asked; it "
        "takes no answer."
    )
    assert withdrawn.structured_content is not None
    assert withdrawn.structured_content["state"] == "withdrawn_by_owner"
    assert re.fullmatch(
        rf"Ask {expired_id} expired at \S+Z: nobody answered it before its deadline; it "
        "takes no answer.",
        text_of(expired),
    )
    assert expired.structured_content is not None
    assert expired.structured_content["state"] == "expired"
    assert text_of(checked) == text_of(expired)
    assert state_after != pb.PRESENCE_STATE_WAITING
    assert late.is_error
    assert text_of(late).startswith("cancel_ask failed: already_exists: ")
    assert "already ended some other way" in text_of(late)


async def test_the_inbox_tools_attach_pictures_from_the_sandbox(
    server: Any, api_world: World, tmp_path: pathlib.Path
) -> None:
    sandbox = tmp_path / "sandbox"
    (sandbox / "shots").mkdir(parents=True)
    (sandbox / "shots" / "login.png").write_bytes(PNG)
    (tmp_path / "secret.png").write_bytes(PNG)
    async with mcp_for(server, api_world, tmp_path, COMPASS_SANDBOX=str(sandbox)) as m:
        posted = await m.call(
            "inbox_post",
            {"key": "login", "body": "It breaks: shots/login.png", "pictures": ["shots/login.png"]},
        )
        outside = await m.call(
            "inbox_reply", {"key": "login", "pictures": [str(tmp_path / "secret.png")]}
        )
        thread = await inbox_thread(server.http_port, api_world, "login")
    async with mcp_for(server, api_world, tmp_path) as bare:
        refused = await bare.call("inbox_reply", {"key": "login", "pictures": ["shots/login.png"]})

    assert not posted.is_error, text_of(posted)
    [entry] = thread
    address = entry["attachments"][0]["address"]
    assert f"Attached 1 picture: login.png at {address}" in text_of(posted)
    assert entry["message"]["blocks"][0]["text"]["text"] == f"It breaks: {address}"
    assert [a["name"] for a in entry["attachments"]] == ["login.png"]
    assert outside.is_error
    assert text_of(outside).startswith("inbox_reply failed: permission_denied: picture ")
    assert refused.is_error
    assert text_of(refused).startswith("inbox_reply failed: failed_precondition: ")


# --- errors -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("tool", "args", "expected"),
    [
        ("ask", {"questions": []}, "ask failed: invalid_argument: questions must have at least 1"),
        (
            "ask",
            {"questions": [{"question": "Which?", "options": [], "multi": True}]},
            "ask failed: invalid_argument: questions[0].multi is not a parameter",
        ),
        (
            "ask",
            {"questions": QUESTIONS, "wait_seconds": 0},
            "ask failed: invalid_argument: wait_seconds must be at least 1",
        ),
        (
            "check_ask",
            {"ask_id": "  "},
            "check_ask failed: invalid_argument: ask_id must not be blank",
        ),
        ("check_ask", {"ask_id": "ask_nope"}, "check_ask failed: not_found: "),
        ("cancel_ask", {}, "cancel_ask failed: invalid_argument: ask_id is required"),
        ("cancel_ask", {"ask_id": "ask_nope"}, "cancel_ask failed: not_found: "),
        (
            "set_status",
            {"state": "waiting"},
            "set_status failed: invalid_argument: state must be one of",
        ),
        ("read_channel", {"channel_id": "nope"}, "read_channel failed: not_found: "),
        ("post_message", {"channel_id": "x", "text": "hi", "extra": 1}, "extra is not a parameter"),
        ("answer_ask", {"ask_id": "x"}, "Unknown tool: answer_ask"),
    ],
)
async def test_a_bad_argument_or_a_refused_call_is_a_tool_error(
    server: Any,
    api_world: World,
    tmp_path: pathlib.Path,
    tool: str,
    args: dict[str, Any],
    expected: str,
) -> None:
    async with mcp_for(server, api_world, tmp_path) as m:
        result = await m.call(tool, args)
        # The MCP server is still there.
        assert len((await m.session.list_tools()).tools) == len(TOOLS)
    assert result.is_error
    assert expected in text_of(result)
    assert "Traceback" not in text_of(result)


async def test_a_nul_in_a_message_is_a_tool_error_not_a_crash(
    server: Any, api_world: World, tmp_path: pathlib.Path
) -> None:
    async with mcp_for(server, api_world, tmp_path) as m:
        result = await m.call(
            "post_message", {"channel_id": str(api_world.channel.channel_id), "text": "a\x00b"}
        )
        fine = await m.call(
            "post_message", {"channel_id": str(api_world.channel.channel_id), "text": "ok"}
        )
    assert text_of(result) == (
        "post_message failed: invalid_argument: text must not contain NUL characters"
    )
    assert result.is_error
    assert not fine.is_error


async def _started(env: dict[str, str]) -> tuple[int, str]:
    proc = await asyncio.create_subprocess_exec(
        str(MCP),
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        env={**env, "COMPASS_LOG_LEVEL": "WARNING"},
    )
    out, err = await asyncio.wait_for(proc.communicate(), 30)
    assert out == b""  # it never began to speak MCP
    assert proc.returncode is not None
    return proc.returncode, err.decode()


async def test_a_refused_token_or_agent_stops_compass_mcp_at_start(
    server: Any, api_world: World
) -> None:
    w = api_world
    code, err = await _started(env_for(server.grpc_port, "cpr_not-a-token", w))
    assert code == 1
    assert (
        err.strip()
        .splitlines()[-1]
        .startswith(
            f"compass-mcp: the Compass server at 127.0.0.1:{server.grpc_port} refused this "
            "runner's token: unauthenticated: "
        )
    )
    stranger = await w.add_account("ghost", kind=w.agent.kind)
    env = env_for(
        server.grpc_port, await runner_for(w), w, COMPASS_AGENT_ID=str(stranger.account_id)
    )
    code, err = await _started(env)
    assert code == 1
    assert (
        err.strip()
        .splitlines()[-1]
        .startswith(
            f"compass-mcp: the Compass server at 127.0.0.1:{server.grpc_port} refused agent "
            f"{stranger.account_id}: not_found: "
        )
    )


# --- the other tools, once each --------------------------------------------------------


async def test_the_channel_and_inbox_tools_act_as_the_agent(
    server: Any, api_world: World, tmp_path: pathlib.Path
) -> None:
    w = api_world
    channel = str(w.channel.channel_id)
    async with mcp_for(server, w, tmp_path) as m:
        channels = text_of(await m.call("list_channels", {}))
        posted = await m.call("post_message", {"channel_id": channel, "text": "on it"})
        read = text_of(await m.call("read_channel", {"channel_id": channel}))
        status = text_of(await m.call("set_status", {"state": "working", "text": "reading"}))
        inbox = await m.call(
            "inbox_post", {"key": "deploy", "title": "Deploy?", "questions": QUESTIONS[:1]}
        )
        replied = text_of(await m.call("inbox_reply", {"key": "deploy", "text": "logs clean"}))
        closed = text_of(await m.call("inbox_close", {"key": "deploy", "reason": "moot"}))
        listed = await m.as_ada("ListMessages", pb.ListMessagesRequest(channel_id=channel))

    assert f"{channel} #general" in channels
    assert not posted.is_error
    assert [(m.author_account_id, m.blocks[0].text.text) for m in listed.messages] == [
        (str(w.agent.account_id), "on it")
    ]
    assert "@scout (" in read and "): on it" in read
    assert "Status set to working" in status
    assert not inbox.is_error, text_of(inbox)
    assert 'inbox item "deploy"' in text_of(inbox)
    assert "how it ends is not shown here" in text_of(inbox)
    assert replied == 'Replied in inbox item "deploy".'
    assert closed.startswith('Closed inbox item "deploy"')


async def test_a_spawned_subagent_asks_under_its_own_name_and_gets_its_answer(
    server: Any, api_world: World, tmp_path: pathlib.Path
) -> None:
    w = api_world
    channel = str(w.channel.channel_id)
    async with mcp_for(server, w, tmp_path) as m:
        spawned = await m.call("spawn_agent", {"handle": "planner"})
        assert not spawned.is_error, text_of(spawned)
        assert spawned.structured_content is not None
        planner = spawned.structured_content["account_id"]
        assert 'Pass agent="planner" to any tool' in text_of(spawned)
        # A sub-agent of the sub-agent: under planner, in scout's channels still.
        nested = await m.call("spawn_agent", {"handle": "worker", "agent": "planner"})
        assert not nested.is_error, text_of(nested)
        assert nested.structured_content is not None
        worker = nested.structured_content["account_id"]

        waiting = m.ask_task({"questions": QUESTIONS, "agent": "planner"})
        ask_id = await m.posted_ask_id()
        presences = await m.as_ada("GetPresence", pb.GetPresenceRequest(account_ids=[planner]))
        assert presences.presences[0].state == pb.PRESENCE_STATE_WAITING
        assert await m.scouts_state() != pb.PRESENCE_STATE_WAITING
        await m.ada_answers(ask_id)
        result = await asyncio.wait_for(waiting, 30)

        posted = await m.call(
            "post_message", {"channel_id": channel, "text": "worker here", "agent": "worker"}
        )
        unknown = await m.call("post_message", {"channel_id": channel, "text": "x", "agent": "z"})
        taken = await m.call("spawn_agent", {"handle": "planner"})
        listed = await m.as_ada("ListMessages", pb.ListMessagesRequest(channel_id=channel))
        accounts = await m.as_ada("GetAccounts", pb.GetAccountsRequest(account_ids=[worker]))

    assert not result.is_error, text_of(result)
    assert text_of(result).startswith(f"Ask {ask_id} was answered:")
    authors = {
        b.ask.ask_id: msg.author_account_id
        for msg in listed.messages
        for b in msg.blocks
        if b.HasField("ask")
    }
    assert authors[ask_id] == planner
    assert not posted.is_error, text_of(posted)
    texts = [
        (msg.author_account_id, b.text.text)
        for msg in listed.messages
        for b in msg.blocks
        if b.HasField("text")
    ]
    assert (worker, "worker here") in texts
    assert accounts.accounts[0].parent_account_id == planner
    assert unknown.is_error
    assert text_of(unknown).startswith("post_message failed: not_found: no sub-agent @z ")
    assert taken.is_error
    assert text_of(taken).startswith("spawn_agent failed: already_exists: ")


def documented_mcp_configuration() -> dict[str, Any]:
    page = (pathlib.Path(__file__).resolve().parents[1] / "docs" / "agents.md").read_text()
    block = re.search(r"\n    (\{\n      \"mcpServers\".*?\n    \})\n", page, re.S)
    assert block, "docs/agents.md has no mcpServers block"
    servers = json.loads(block.group(1).replace("\n    ", "\n"))["mcpServers"]
    return servers["compass"]  # type: ignore[no-any-return]


async def test_the_documented_client_configuration_launches_compass_mcp(
    server: Any, api_world: World, tmp_path: pathlib.Path
) -> None:
    config = documented_mcp_configuration()
    w = api_world
    real = {
        "COMPASS_URL": f"127.0.0.1:{server.grpc_port}",
        "COMPASS_RUNNER_TOKEN": await runner_for(w),
        "COMPASS_AGENT_ID": str(w.agent.account_id),
        "COMPASS_CHANNEL_ID": str(w.channel.channel_id),
    }
    assert set(config["env"]) == set(real)
    params = StdioServerParameters(command=str(MCP), args=config["args"], env=real)
    with (tmp_path / "mcp.log").open("w") as errlog:
        async with stdio_client(params, errlog=errlog) as (read, write):
            async with ClientSession(read, write) as session:
                await session.initialize()
                channels = await session.call_tool("list_channels", {})
    assert f"{w.channel.channel_id} #general" in text_of(channels)
