"""The reference runner: `compass-runner` as a real process against the real
server, a person answering over Connect JSON, and the relay client riding out
a server restart with each delivery handed to the agent exactly once."""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import pathlib
import re
import signal
import sys
from collections.abc import AsyncIterator
from typing import Any

import httpx
import psycopg
import pytest

from compass.v1 import comms_pb2 as pb
from compass_agentkit.relay import Backoff, Relay
from compass_agentkit.tools import ToolError, comms_tools
from compass_server.app import CompassServer, Settings
from compass_server.store.types import Answer, TextBlock
from tests.relay_client import runner_for
from tests.world import World

RUNNER = pathlib.Path(sys.executable).parent / "compass-runner"
WAIT = 30.0


# --- helpers -----------------------------------------------------------------------


class Proc:
    """A compass-runner process; stderr is collected as it comes."""

    def __init__(self, proc: asyncio.subprocess.Process) -> None:
        self.proc = proc
        self.stderr: list[str] = []
        assert proc.stderr is not None
        self._pump = asyncio.ensure_future(self._read(proc.stderr))

    async def _read(self, stream: asyncio.StreamReader) -> None:
        while line := await stream.readline():
            self.stderr.append(line.decode())

    async def line(self) -> str:
        assert self.proc.stdout is not None
        line = await asyncio.wait_for(self.proc.stdout.readline(), WAIT)
        assert line, f"no output; stderr:\n{self.log}"
        return line.decode()

    async def exit_code(self) -> int:
        code = await asyncio.wait_for(self.proc.wait(), WAIT)
        await self._pump
        return code

    async def rest_of_stdout(self) -> str:
        assert self.proc.stdout is not None
        return (await self.proc.stdout.read()).decode()

    @property
    def log(self) -> str:
        return "".join(self.stderr)

    async def kill(self) -> None:
        if self.proc.returncode is None:
            self.proc.kill()
            await self.proc.wait()
        with contextlib.suppress(Exception):
            await asyncio.wait_for(self._pump, 5)


@contextlib.asynccontextmanager
async def runner(*args: str, env: dict[str, str] | None = None) -> AsyncIterator[Proc]:
    environ = {k: v for k, v in os.environ.items() if k != "COMPASS_RUNNER_TOKEN"}
    proc = Proc(
        await asyncio.create_subprocess_exec(
            str(RUNNER),
            *args,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            env={**environ, **(env or {})},
        )
    )
    try:
        yield proc
    finally:
        await proc.kill()


async def connect_json(port: int, method: str, body: dict[str, Any], token: str) -> Any:
    """A person's call over Connect JSON, as curl makes it."""
    async with httpx.AsyncClient(timeout=WAIT) as http:
        response = await http.post(
            f"http://127.0.0.1:{port}/compass.v1.CommsService/{method}",
            json=body,
            headers={"authorization": f"Bearer {token}"},
        )
    assert response.status_code == 200, response.text
    return response.json()


async def the_agents_ask(port: int, w: World, proc: Proc) -> dict[str, Any]:
    """Ada waits for scout's ask in general, as she would on the page."""
    token = w.tokens[w.human.account_id]
    for _ in range(int(WAIT / 0.1)):
        assert proc.proc.returncode is None, f"the runner exited early:\n{proc.log}"
        listed = await connect_json(
            port, "ListMessages", {"channelId": str(w.channel.channel_id)}, token
        )
        for message in listed.get("messages", []):
            for block in message["blocks"]:
                if "ask" in block and message["authorAccountId"] == str(w.agent.account_id):
                    return block["ask"]  # type: ignore[no-any-return]
        await asyncio.sleep(0.1)
    raise AssertionError(f"the agent posted no ask:\n{proc.log}")


def ada_answer(ask: dict[str, Any]) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """Ada's answer to the demo ask, and the results the agent must print."""
    single, multi = ask["questions"]
    assert not single.get("allowMultiple") and multi.get("allowMultiple")
    body = {
        "askId": ask["askId"],
        "answers": [
            {"questionId": single["questionId"], "chosenOptionIds": [single["options"][1]["id"]]},
            {
                "questionId": multi["questionId"],
                "chosenOptionIds": [multi["options"][0]["id"], multi["options"][2]["id"]],
                "customText": "and a CLI",
            },
        ],
    }
    expected = [
        {
            "question_id": single["questionId"],
            "selected_options": [single["options"][1]["label"]],
            "custom_input": None,
            "timed_out": False,
        },
        {
            "question_id": multi["questionId"],
            "selected_options": [multi["options"][0]["label"], multi["options"][2]["label"]],
            "custom_input": "and a CLI",
            "timed_out": False,
        },
    ]
    return body, expected


async def acked_cursor(database_url: str, w: World) -> int:
    async with await psycopg.AsyncConnection.connect(database_url) as conn:
        row = await (
            await conn.execute(
                "SELECT acked_event_id FROM delivery_cursors WHERE agent_id = %s",
                (w.agent.account_id,),
            )
        ).fetchone()
    assert row is not None
    return int(row[0])


def handled(log: str) -> list[int]:
    """The event ids the runner handed to its agent, from its log."""
    return [int(n) for n in re.findall(r"handled event (\d+)", log)]


class Restartable:
    """An in-process server that can stop and come back on the same ports."""

    def __init__(self, database_url: str, data_dir: pathlib.Path) -> None:
        self.database_url = database_url
        self.data_dir = data_dir
        self.grpc_port = 0
        self.http_port = 0
        self.server: CompassServer | None = None

    async def start(self) -> None:
        self.server = CompassServer(
            Settings(
                database_url=self.database_url,
                data_dir=self.data_dir,
                grpc_listen=f"127.0.0.1:{self.grpc_port}",
                http_listen=f"127.0.0.1:{self.http_port}",
            )
        )
        await self.server.start()
        self.grpc_port, self.http_port = self.server.grpc_port, self.server.http_port

    async def stop(self) -> None:
        if self.server is not None:
            await self.server.stop(1.0)
            self.server = None


@pytest.fixture
async def restartable(database_url: str, tmp_path: pathlib.Path) -> AsyncIterator[Restartable]:
    srv = Restartable(database_url, tmp_path)
    await srv.start()
    yield srv
    await srv.stop()


# --- the demo, end to end ------------------------------------------------------------


async def test_the_demo_agent_asks_a_person_answers_and_the_runner_prints_it(
    server: Any, api_world: World, database_url: str
) -> None:
    w = api_world
    token = await runner_for(w)
    async with runner(
        "--grpc",
        f"127.0.0.1:{server.grpc_port}",
        "--token",
        token,
        "--agent",
        str(w.agent.account_id),
        "--demo",
        "--channel",
        str(w.channel.channel_id),
    ) as proc:
        ask = await the_agents_ask(server.http_port, w, proc)
        assert not ask.get("answered")
        body, expected = ada_answer(ask)
        await connect_json(server.http_port, "RespondToAsk", body, w.tokens[w.human.account_id])

        printed = json.loads(await proc.line())
        assert await proc.exit_code() == 0, proc.log
        assert await proc.rest_of_stdout() == ""
    assert printed["ask_id"] == ask["askId"]
    assert printed["ending"] == "answered"
    assert printed["answers"] == expected
    # Acked after the agent handled it: a restarted runner won't hear it again.
    assert await acked_cursor(database_url, w) >= printed["event_id"]
    assert handled(proc.log).count(printed["event_id"]) == 1


async def test_the_demo_agent_hears_a_decline_and_prints_it(
    server: Any, api_world: World, database_url: str
) -> None:
    w = api_world
    async with runner(
        "--grpc",
        f"127.0.0.1:{server.grpc_port}",
        "--token",
        await runner_for(w),
        "--agent",
        str(w.agent.account_id),
        "--demo",
        "--channel",
        str(w.channel.channel_id),
    ) as proc:
        ask = await the_agents_ask(server.http_port, w, proc)
        await connect_json(
            server.http_port,
            "DeclineAsk",
            {"askId": ask["askId"], "reason": "not this sprint"},
            w.tokens[w.human.account_id],
        )
        printed = json.loads(await proc.line())
        assert await proc.exit_code() == 0, proc.log
    assert printed["ask_id"] == ask["askId"]
    assert printed["ending"] == "declined"
    assert printed["text"] == (
        f'Ask {ask["askId"]} was declined by @ada: "not this sprint". Nobody answered it; it '
        "takes no answer."
    )
    assert "answers" not in printed
    assert await acked_cursor(database_url, w) >= printed["event_id"]


async def test_the_runner_hands_deliveries_to_its_agent_and_acks_them(
    server: Any, api_world: World, database_url: str
) -> None:
    w = api_world
    token = await runner_for(w)
    async with runner(
        "--grpc",
        f"127.0.0.1:{server.grpc_port}",
        "--agent",
        str(w.agent.account_id),
        env={"COMPASS_RUNNER_TOKEN": token},
    ) as proc:
        posted = await w.store.append_message(w.human, w.channel.channel_id, [TextBlock("hello")])
        line = json.loads(await proc.line())
        assert line["agent_id"] == str(w.agent.account_id)
        assert line["kind"] == "message_posted"
        assert line["text"] == f"@ada ({posted.message_id}): hello"
        for _ in range(100):
            if await acked_cursor(database_url, w) >= line["event_id"]:
                break
            await asyncio.sleep(0.05)
        assert await acked_cursor(database_url, w) >= line["event_id"]

        # A person's reply in the agent's inbox comes on the same lane.
        item, _ = await server.inbox.post(w.agent, "deploy", "", "Deploy?", None, [])
        reply = await server.inbox.reply(w.human, item.item_id, "which region?", [])
        line = json.loads(await proc.line())
        assert line["kind"] == "inbox_item_changed"
        assert line["text"] == f"@ada ({reply[1].message_id}): which region?"
        proc.proc.send_signal(signal.SIGTERM)
        assert await proc.exit_code() == 0, proc.log


async def test_the_runner_refuses_a_bad_token_without_retrying(server: Any) -> None:
    async with runner(
        "--grpc", f"127.0.0.1:{server.grpc_port}", "--token", "cpr_nope", "--agent", "x"
    ) as proc:
        assert await proc.exit_code() == 1
    assert "unauthenticated" in proc.log


async def test_the_runner_refuses_an_agent_not_assigned_to_it(
    server: Any, api_world: World
) -> None:
    token = await runner_for(api_world)
    stranger = await api_world.add_account("ghost", kind=api_world.agent.kind)
    async with runner(
        "--grpc",
        f"127.0.0.1:{server.grpc_port}",
        "--token",
        token,
        "--agent",
        str(stranger.account_id),
    ) as proc:
        assert await proc.exit_code() == 1
    assert "not_found" in proc.log and "not assigned" in proc.log


async def test_the_demo_needs_one_agent_and_a_channel() -> None:
    async with runner("--token", "t", "--agent", "a", "--demo") as proc:
        assert await proc.exit_code() == 2
    assert "--channel" in proc.log


async def test_a_sandbox_that_is_no_folder_is_a_usage_error(tmp_path: pathlib.Path) -> None:
    missing = str(tmp_path / "nope")
    async with runner("--token", "t", "--agent", "a", "--sandbox", missing) as proc:
        assert await proc.exit_code() == 2
    assert f"the sandbox {missing!r} is not a folder" in proc.log
    mcp = await asyncio.create_subprocess_exec(
        str(RUNNER.parent / "compass-mcp"),
        "--token",
        "t",
        "--agent",
        "a",
        stderr=asyncio.subprocess.PIPE,
        env={**os.environ, "COMPASS_SANDBOX": missing},
    )
    _, err = await asyncio.wait_for(mcp.communicate(), WAIT)
    assert mcp.returncode == 2
    assert f"the sandbox {missing!r} is not a folder" in err.decode()


# --- riding out a drop ----------------------------------------------------------------


async def test_the_runner_rebinds_after_a_restart_and_hears_the_answer_given_meanwhile(
    server: Any, api_world: World, restartable: Restartable, database_url: str
) -> None:
    w = api_world
    token = await runner_for(w)
    async with runner(
        "--grpc",
        f"127.0.0.1:{restartable.grpc_port}",
        "--token",
        token,
        "--agent",
        str(w.agent.account_id),
        "--demo",
        "--channel",
        str(w.channel.channel_id),
    ) as proc:
        ask = await the_agents_ask(restartable.http_port, w, proc)
        await restartable.stop()
        # Answered while the runner's hub is down, through another server.
        body, expected = ada_answer(ask)
        await connect_json(server.http_port, "RespondToAsk", body, w.tokens[w.human.account_id])
        await asyncio.sleep(0.5)
        assert proc.proc.returncode is None, proc.log

        await restartable.start()
        printed = json.loads(await proc.line())
        assert await proc.exit_code() == 0, proc.log
    assert printed["answers"] == expected
    assert proc.log.count("bound session") >= 2, proc.log
    assert "reconnecting in" in proc.log
    ids = handled(proc.log)
    assert len(ids) == len(set(ids)), proc.log
    assert await acked_cursor(database_url, w) >= printed["event_id"]


async def test_a_delivery_in_hand_at_a_drop_and_one_posted_while_away_each_arrive_once(
    api_world: World,
    restartable: Restartable,
    database_url: str,
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO, logger="compass_agentkit.relay")
    w = api_world
    token = await runner_for(w)
    relay = Relay(f"127.0.0.1:{restartable.grpc_port}", token, backoff=Backoff(initial=0.05))
    await relay.start()
    seen: list[tuple[int, str]] = []
    hold = asyncio.Event()
    holding = asyncio.Event()

    async def agent(event: pb.Event) -> None:
        text = event.message_posted.message.blocks[0].text.text
        seen.append((event.event_id, text))
        if text == "two":
            holding.set()
            await hold.wait()  # still in hand when the stream drops: never acked

    async def until(predicate: Any) -> None:
        for _ in range(int(WAIT / 0.05)):
            if predicate():
                return
            await asyncio.sleep(0.05)
        raise AssertionError(f"timed out; seen {seen}")

    try:
        await relay.bind(str(w.agent.account_id), agent)
        await w.post_text(w.human, "one")
        await until(lambda: [t for _, t in seen] == ["one"])
        await w.post_text(w.human, "two")
        await asyncio.wait_for(holding.wait(), WAIT)

        await restartable.stop()
        await w.post_text(w.human, "three")  # while the runner is away
        hold.set()
        await restartable.start()

        await until(lambda: [t for _, t in seen][-1:] == ["three"])
        await asyncio.sleep(0.5)  # room for a duplicate to show up
        assert [t for _, t in seen] == ["one", "two", "three"]
        assert relay.connections >= 2
        # The hub did send "two" again (it was never acked), and it was not handed over again.
        two = seen[1][0]
        assert f"event {two} came again after a reconnect" in caplog.text
        last = seen[-1][0]
        for _ in range(100):
            if await acked_cursor(database_url, w) >= last:
                break
            await asyncio.sleep(0.05)
        assert await acked_cursor(database_url, w) == last
    finally:
        await relay.close()


async def test_a_call_while_the_hub_is_away_fails_as_unavailable_then_works_again(
    api_world: World, restartable: Restartable
) -> None:
    w = api_world
    token = await runner_for(w)
    relay = Relay(
        f"127.0.0.1:{restartable.grpc_port}",
        token,
        backoff=Backoff(initial=0.05),
        call_timeout=0.5,
    )
    await relay.start()
    try:
        session = await relay.bind(str(w.agent.account_id), _ignore)
        [channels] = [
            t for t in comms_tools(relay.caller(session.session_id)) if t.arm == "list_channels"
        ]
        assert "#general" in await channels.handler({})
        await restartable.stop()
        with pytest.raises(ToolError) as failed:
            await channels.handler({})
        assert str(failed.value).startswith("comms_list_channels failed: unavailable: ")
        await restartable.start()
        for _ in range(int(WAIT / 0.1)):
            with contextlib.suppress(ToolError):
                assert "#general" in await channels.handler({})
                break
            await asyncio.sleep(0.1)
        else:
            raise AssertionError("the relay did not come back")
    finally:
        await relay.close()


async def _ignore(event: pb.Event) -> None:
    del event


def test_backoff_doubles_up_to_its_cap_with_jitter_and_resets() -> None:
    b = Backoff(initial=0.25, factor=2.0, maximum=2.0, jitter=0.5)
    delays = [b.next() for _ in range(6)]
    caps = [0.25, 0.5, 1.0, 2.0, 2.0, 2.0]
    for delay, cap in zip(delays, caps, strict=True):
        assert cap * 0.5 <= delay <= cap
    b.reset()
    assert b.next() <= 0.25


async def test_a_rebind_refused_as_unavailable_is_tried_again_and_the_answer_arrives(
    api_world: World, restartable: Restartable, database_url: str
) -> None:
    w = api_world
    token = await runner_for(w)
    lost: list[str] = []
    relay = Relay(
        f"127.0.0.1:{restartable.grpc_port}",
        token,
        backoff=Backoff(initial=0.05, maximum=0.2),
        on_lost=lambda sid, err: lost.append(f"{sid}: {err}"),
    )
    await relay.start()
    heard: asyncio.Queue[pb.Event] = asyncio.Queue()

    async def agent(event: pb.Event) -> None:
        await heard.put(event)

    try:
        await relay.bind(str(w.agent.account_id), agent)
        asked = await w.post_ask()
        await restartable.stop()
        ask_id = asked.blocks[0].ask_id  # type: ignore[union-attr]
        await w.store.answer_ask(w.human, ask_id, [Answer("db"), Answer("langs")])
        async with await psycopg.AsyncConnection.connect(database_url) as lock:
            # The agent's row held: the rebind waits for it, and is cut off
            # at the database, so the hub answers it `unavailable`.
            await lock.execute(
                "SELECT 1 FROM accounts WHERE id = %s FOR UPDATE", (w.agent.account_id,)
            )
            await restartable.start()
            async with await psycopg.AsyncConnection.connect(
                database_url, autocommit=True
            ) as watch:
                for _ in range(int(WAIT / 0.05)):
                    cur = await watch.execute(
                        "SELECT pg_cancel_backend(pid) FROM pg_stat_activity"
                        " WHERE datname = current_database() AND wait_event_type = 'Lock'"
                        " AND pid <> pg_backend_pid()"
                    )
                    if await cur.fetchall():
                        break
                    await asyncio.sleep(0.05)
                else:
                    raise AssertionError("the rebind never waited for the agent's row")
            await lock.rollback()
        answer = await asyncio.wait_for(heard.get(), WAIT)
        assert answer.message_posted.message.blocks[0].ask_answer.ask_id == str(ask_id)
        assert lost == []
    finally:
        await relay.close()
