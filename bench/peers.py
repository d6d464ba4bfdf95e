"""The peers, side by side: the same lifecycle — an agent asks a person a
two-option question and resumes with the answer — through LangGraph and
through the A2A Python SDK, each on the same PostgreSQL as Compass.

* `peer_langgraph`: a one-node graph whose node calls `interrupt()` with the
  question; the agent runs it on a new thread to the interrupt, the person's
  answer is `Command(resume=…)` on that thread, and the graph runs on to its
  end with the answer. LangGraph's `AsyncPostgresSaver` checkpointer on a
  psycopg pool of K connections, in this process (LangGraph is a library:
  no network hop, which favours it).
* `peer_a2a`: an A2A agent served by the SDK (`DefaultRequestHandler`, JSON-RPC
  routes under Starlette and uvicorn, in its own process) with the SDK's
  `DatabaseTaskStore` (SQLAlchemy and asyncpg). The agent's task asks with
  `input-required`; the person's reply is a message on that task, and the
  agent completes it with the answer as an artifact. The client is the SDK's
  (`ClientFactory`, JSON-RPC over one httpx client).

Compass's row is `lifecycle_grpc` (bench/server_lifecycle.py). `bench.run`
runs these rows interleaved with it and the ceiling:

    python -m bench.run --rows lifecycle_grpc,peer_langgraph,peer_a2a --k 1,16

The race each must win — two different answers at once to the same question:
how many were acknowledged and which one stands — is its own command:

    python -m bench.peers race [--database-url ADMIN_URL] [--rounds 100]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import socket
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any, TypedDict

import grpc
from psycopg.rows import dict_row
from psycopg_pool import AsyncConnectionPool

from bench.harness import (
    BenchContext,
    LoadResult,
    Measure,
    Phases,
    Row,
    default_database_url,
    resolve_loop,
    run_async,
)
from bench.server import Team, answer_request, ask_request, cpu_probe, shared_server

QUESTION = "Ship the release to production now?"
OPTIONS = ("yes", "no")
ASK, RESUME = "ask", "resume"


# --------------------------------------------------------------------------- LangGraph


class _State(TypedDict, total=False):
    question: str
    answer: str


def _graph(checkpointer: Any) -> Any:
    from langgraph.graph import END, START, StateGraph
    from langgraph.types import interrupt

    def ask(state: _State) -> _State:
        answer = interrupt({"question": state["question"], "options": list(OPTIONS)})
        return {"answer": answer}

    builder = StateGraph(_State)
    builder.add_node("ask", ask)
    builder.add_edge(START, "ask")
    builder.add_edge("ask", END)
    return builder.compile(checkpointer=checkpointer)


@asynccontextmanager
async def langgraph_app(database_url: str, size: int) -> AsyncIterator[Any]:
    """The graph on a checkpointer of its own pool (the tables made once)."""
    from langgraph.checkpoint.postgres.aio import AsyncPostgresSaver

    kwargs = {"autocommit": True, "prepare_threshold": 0, "row_factory": dict_row}
    async with AsyncConnectionPool(
        database_url, min_size=size, max_size=size, kwargs=kwargs, open=False
    ) as pool:
        saver = AsyncPostgresSaver(pool)  # type: ignore[arg-type]
        await saver.setup()
        yield _graph(saver)


async def langgraph_ask(graph: Any) -> dict[str, Any]:
    """The agent runs a new thread to its interrupt; returns its config."""
    config = {"configurable": {"thread_id": uuid.uuid4().hex}}
    out = await graph.ainvoke({"question": QUESTION}, config)
    if "__interrupt__" not in out:
        raise RuntimeError("the graph did not stop at its interrupt")
    return config


async def langgraph_resume(graph: Any, config: dict[str, Any], answer: str) -> str:
    from langgraph.types import Command

    out = await graph.ainvoke(Command(resume=answer), config)
    return str(out["answer"])


@asynccontextmanager
async def open_langgraph(ctx: BenchContext) -> AsyncIterator[Measure]:
    probe = cpu_probe(ctx.database_url)

    async def measure(k: int) -> LoadResult:
        async with langgraph_app(ctx.database_url, k) as graph:
            clock = time.perf_counter

            async def call(i: int) -> Phases:
                t0 = clock()
                config = await langgraph_ask(graph)
                t1 = clock()
                got = await langgraph_resume(graph, config, OPTIONS[0])
                if got != OPTIONS[0]:
                    raise RuntimeError(f"resumed with {got!r}")
                return Phases({ASK: t1 - t0, RESUME: clock() - t1})

            return await ctx.load(call, k, cpu=probe)

    yield measure


# --------------------------------------------------------------------------- A2A


def _a2a_card(url: str) -> Any:
    from a2a.types import AgentCapabilities, AgentCard, AgentInterface, AgentSkill

    return AgentCard(
        name="bench asker",
        description="Asks a person a two-option question and resumes with the answer.",
        version="1.0.0",
        supported_interfaces=[AgentInterface(protocol_binding="JSONRPC", url=url)],
        capabilities=AgentCapabilities(streaming=False),
        default_input_modes=["text/plain"],
        default_output_modes=["text/plain"],
        skills=[AgentSkill(id="ask", name="ask", description="asks", tags=["ask"])],
    )


def _a2a_executor() -> Any:
    from a2a.helpers import new_task, new_text_part
    from a2a.server.agent_execution import AgentExecutor
    from a2a.server.tasks import TaskUpdater
    from a2a.types import TaskState

    class Asker(AgentExecutor):
        async def execute(self, context: Any, event_queue: Any) -> None:
            updater = TaskUpdater(event_queue, context.task_id, context.context_id)
            task = context.current_task
            if task is None or task.status.state != TaskState.TASK_STATE_INPUT_REQUIRED:
                if task is None:
                    history = [context.message] if context.message is not None else []
                    await event_queue.enqueue_event(
                        new_task(
                            context.task_id,
                            context.context_id,
                            TaskState.TASK_STATE_SUBMITTED,
                            history=history,
                        )
                    )
                question = updater.new_agent_message([new_text_part(QUESTION)])
                await updater.requires_input(question)
                return
            answer = context.get_user_input()
            await updater.add_artifact([new_text_part(answer)], name="answer")
            await updater.complete()

        async def cancel(self, context: Any, event_queue: Any) -> None:
            updater = TaskUpdater(event_queue, context.task_id, context.context_id)
            await updater.cancel()

    return Asker()


def a2a_serve(database_url: str, port: int) -> None:
    """The A2A agent's process: the SDK's handler and database task store."""
    import uvicorn
    from a2a.server.request_handlers import DefaultRequestHandler
    from a2a.server.routes import create_agent_card_routes, create_jsonrpc_routes
    from a2a.server.tasks import DatabaseTaskStore
    from sqlalchemy.ext.asyncio import create_async_engine
    from starlette.applications import Starlette

    url = database_url.replace("postgresql://", "postgresql+asyncpg://", 1)
    engine = create_async_engine(url, pool_size=20, max_overflow=0)
    card = _a2a_card(f"http://127.0.0.1:{port}/")
    handler = DefaultRequestHandler(
        agent_executor=_a2a_executor(),
        task_store=DatabaseTaskStore(engine, create_table=True),
        agent_card=card,
    )
    app = Starlette(routes=create_agent_card_routes(card) + create_jsonrpc_routes(handler, "/"))
    uvicorn.run(app, host="127.0.0.1", port=port, log_level="warning", access_log=False)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass
class A2AServer:
    url: str
    pid: int


@asynccontextmanager
async def a2a_server(database_url: str) -> AsyncIterator[A2AServer]:
    import httpx

    port = _free_port()
    # Its log is shown only if it fails to start: stopping it prints the
    # SDK's telemetry noise.
    with tempfile.TemporaryFile() as log:
        proc = await asyncio.create_subprocess_exec(
            *(sys.executable, "-m", "bench.peers", "serve-a2a"),
            *("--database-url", database_url, "--port", str(port)),
            env={**os.environ, "PYTHONWARNINGS": "ignore"},
            stdout=log,
            stderr=subprocess.STDOUT,
        )
        url = f"http://127.0.0.1:{port}/"
        try:
            async with httpx.AsyncClient() as http:
                deadline = time.monotonic() + 60
                while True:
                    if proc.returncode is not None:
                        log.seek(0)
                        sys.stderr.write(log.read().decode(errors="replace"))
                        raise RuntimeError(f"the A2A server exited ({proc.returncode})")
                    with contextlib.suppress(httpx.HTTPError):
                        card = await http.get(url + ".well-known/agent-card.json")
                        if card.status_code == 200:
                            break
                    if time.monotonic() > deadline:
                        raise RuntimeError("the A2A server did not start in 60 s")
                    await asyncio.sleep(0.1)
            yield A2AServer(url, proc.pid)
        finally:
            if proc.returncode is None:
                proc.terminate()
                try:
                    await asyncio.wait_for(proc.wait(), 10)
                except TimeoutError:
                    proc.kill()
                    await proc.wait()


@asynccontextmanager
async def a2a_client(url: str, k: int) -> AsyncIterator[Any]:
    import httpx
    from a2a.client import ClientConfig, ClientFactory

    limits = httpx.Limits(max_connections=k, max_keepalive_connections=k)
    async with httpx.AsyncClient(limits=limits, timeout=60) as http:
        factory = ClientFactory(ClientConfig(streaming=False, httpx_client=http))
        client = factory.create(_a2a_card(url))
        try:
            yield client
        finally:
            await client.close()


async def _a2a_send(client: Any, text: str, task_id: str = "", context_id: str = "") -> Any:
    from a2a.helpers import new_text_part
    from a2a.types import Message, Role, SendMessageRequest

    message = Message(
        role=Role.ROLE_USER,
        message_id=uuid.uuid4().hex,
        parts=[new_text_part(text)],
        task_id=task_id,
        context_id=context_id,
    )
    task = None
    async for response in client.send_message(SendMessageRequest(message=message)):
        if response.HasField("task"):
            task = response.task
    if task is None:
        raise RuntimeError("the agent answered without a task")
    return task


async def a2a_ask(client: Any) -> Any:
    from a2a.types import TaskState

    task = await _a2a_send(client, "start")
    if task.status.state != TaskState.TASK_STATE_INPUT_REQUIRED:
        raise RuntimeError(f"the task is {TaskState.Name(task.status.state)}, not asking")
    return task


async def a2a_resume(client: Any, asked: Any, answer: str) -> str:
    from a2a.types import TaskState

    task = await _a2a_send(client, answer, asked.id, asked.context_id)
    if task.status.state != TaskState.TASK_STATE_COMPLETED:
        raise RuntimeError(f"the task is {TaskState.Name(task.status.state)}, not completed")
    return _a2a_answer(task)


def _a2a_answer(task: Any) -> str:
    return "".join(p.text for a in task.artifacts for p in a.parts)


@asynccontextmanager
async def open_a2a(ctx: BenchContext) -> AsyncIterator[Measure]:
    async with a2a_server(ctx.database_url) as server:
        probe = cpu_probe(ctx.database_url, server.pid)

        async def measure(k: int) -> LoadResult:
            async with a2a_client(server.url, k) as client:
                clock = time.perf_counter

                async def call(i: int) -> Phases:
                    t0 = clock()
                    asked = await a2a_ask(client)
                    t1 = clock()
                    got = await a2a_resume(client, asked, OPTIONS[0])
                    if got != OPTIONS[0]:
                        raise RuntimeError(f"resumed with {got!r}")
                    return Phases({ASK: t1 - t0, RESUME: clock() - t1})

                return await ctx.load(call, k, cpu=probe)

        yield measure


LANGGRAPH_ROW = Row(
    key="peer_langgraph",
    title="peer: LangGraph interrupt/resume",
    op="lifecycle: a graph run to interrupt() on a new thread, then Command(resume=…) to its "
    "end (AsyncPostgresSaver on a pool of K, in process)",
    open=open_langgraph,
)

A2A_ROW = Row(
    key="peer_a2a",
    title="peer: A2A input-required",
    op="lifecycle: message/send → task input-required, then the reply on that task → "
    "completed with the answer (A2A SDK server + DatabaseTaskStore, SDK client, JSON-RPC)",
    open=open_a2a,
)


# --------------------------------------------------------------------------- the race


@dataclass
class RaceTally:
    rounds: int = 0
    # Rounds where exactly one of the two answers was acknowledged.
    once: int = 0
    # Rounds where both were acknowledged (told "done" to two people).
    both: int = 0
    # Rounds where neither was.
    neither: int = 0
    # Rounds where what stands is not the (one) acknowledged answer.
    wrong: int = 0
    # Rounds where two answers were recorded.
    several_stand: int = 0

    def add(self, acknowledged: list[str], stands: str | None) -> None:
        self.rounds += 1
        if len(acknowledged) == 1:
            self.once += 1
            if stands != acknowledged[0]:
                self.wrong += 1
        elif len(acknowledged) == 2:
            self.both += 1
        else:
            self.neither += 1

    def line(self, name: str) -> str:
        return (
            f"| {name} | {self.rounds} | {self.once} | {self.both} | {self.neither} "
            f"| {self.wrong} | {self.several_stand} |"
        )


async def _settle(*calls: Any) -> list[Any]:
    return await asyncio.gather(*calls, return_exceptions=True)


async def race_compass(admin_url: str, rounds: int) -> RaceTally:
    tally = RaceTally()
    async with shared_server(admin_url) as server:
        team = Team(server, "bench race")
        async with grpc.aio.insecure_channel(server.grpc_target) as channel:
            from compass.v1 import comms_pb2, comms_pb2_grpc

            stub = comms_pb2_grpc.CommsServiceStub(channel)
            for _ in range(rounds):
                (pair,) = await team.fresh(1)
                posted = await stub.PostMessage(
                    ask_request(pair.channel_id), metadata=pair.agent.metadata
                )
                answers = []
                for option in OPTIONS:
                    req = answer_request(posted)
                    req.answers[0].chosen_option_ids[:] = [option]
                    answers.append(req)
                results = await _settle(
                    *(stub.RespondToAsk(a, metadata=pair.human.metadata) for a in answers)
                )
                acknowledged = [
                    o for o, r in zip(OPTIONS, results, strict=True) if not isinstance(r, Exception)
                ]
                listed = await stub.ListMessages(
                    comms_pb2.ListMessagesRequest(channel_id=pair.channel_id, page_size=50),
                    metadata=pair.human.metadata,
                )
                standing = [
                    q.chosen_option_ids[0]
                    for m in listed.messages
                    for b in m.blocks
                    if b.HasField("ask_answer")
                    for q in b.ask_answer.questions
                    if q.chosen_option_ids
                ]
                if len(standing) > 1:
                    tally.several_stand += 1
                tally.add(acknowledged, standing[0] if len(standing) == 1 else None)
    return tally


async def race_langgraph(database_url: str, rounds: int) -> RaceTally:
    tally = RaceTally()
    async with langgraph_app(database_url, 4) as graph:
        for _ in range(rounds):
            config = await langgraph_ask(graph)
            results = await _settle(*(langgraph_resume(graph, config, o) for o in OPTIONS))
            acknowledged = [r for r in results if isinstance(r, str)]
            state = await graph.aget_state(config)
            tally.add(acknowledged, state.values.get("answer"))
    return tally


async def race_a2a(database_url: str, rounds: int) -> RaceTally:
    tally = RaceTally()
    async with a2a_server(database_url) as server, a2a_client(server.url, 4) as client:
        from a2a.types import GetTaskRequest

        for _ in range(rounds):
            asked = await a2a_ask(client)
            results = await _settle(*(a2a_resume(client, asked, o) for o in OPTIONS))
            acknowledged = [r for r in results if isinstance(r, str)]
            task = await client.get_task(GetTaskRequest(id=asked.id))
            tally.add(acknowledged, _a2a_answer(task) or None)
    return tally


async def race(admin_url: str, rounds: int) -> str:
    from bench import run as bench_run

    dbname = "compass_bench_race"
    await bench_run.create_database(admin_url, dbname)
    url = bench_run.bench_database_url(admin_url, dbname)
    try:
        rows = [
            ("Compass (RespondToAsk ×2)", await race_compass(url, rounds)),
            ("LangGraph (Command(resume) ×2)", await race_langgraph(url, rounds)),
            ("A2A SDK (reply on the task ×2)", await race_a2a(url, rounds)),
        ]
    finally:
        await bench_run.drop_database(admin_url, dbname)
    head = [
        "| two different answers at once | rounds | one acknowledged | both acknowledged "
        "| none | stands ≠ acknowledged | two recorded |",
        "|---|---:|---:|---:|---:|---:|---:|",
    ]
    return "\n".join(head + [t.line(name) for name, t in rows])


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(prog="python -m bench.peers", description=__doc__.split("\n")[0])
    sub = p.add_subparsers(dest="command", required=True)
    r = sub.add_parser("race", help="two different answers at once, for Compass and each peer")
    r.add_argument("--database-url", default=default_database_url(), help="admin URL")
    r.add_argument("--rounds", type=int, default=100)
    r.add_argument("--loop", choices=("auto", "uvloop", "asyncio"), default="auto")
    s = sub.add_parser("serve-a2a", help="(internal) the A2A agent's process")
    s.add_argument("--database-url", required=True)
    s.add_argument("--port", type=int, required=True)
    args = p.parse_args(argv)
    if args.command == "serve-a2a":
        a2a_serve(args.database_url, args.port)
        return
    print(run_async(race(args.database_url, args.rounds), resolve_loop(args.loop)))


if __name__ == "__main__":
    main()
