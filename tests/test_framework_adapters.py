"""The framework adapters against a real server and the real frameworks, with
no model call: a LangGraph graph (no LLM node) pausing at interrupts, with
its PostgreSQL checkpointer; LangChain's human-in-the-loop middleware in an
agent whose chat model is scripted; an OpenAI Agents SDK agent whose model
is scripted, stopping at a tool that needs approval. People answer over the
API; a restarted process resumes without asking twice."""

from __future__ import annotations

import asyncio
import contextlib
import json
import operator
import pathlib
import sys
import uuid
from collections.abc import AsyncIterator
from typing import Annotated, Any, TypedDict

import psycopg
import pytest

from compass_agentkit.langgraph import CompassInterrupts
from compass_agentkit.mcp_server.session import AgentSession
from compass_agentkit.openai_agents import CompassApprovals
from compass_agentkit.relay import Relay
from compass_server.store.types import Answer, Ask, Operator
from tests.world import World

pytestmark = pytest.mark.timeout(180)


@pytest.fixture
async def app_db(pg_admin_url: str) -> AsyncIterator[str]:
    """A database of the application's own (its checkpoints, the adapters' table)."""
    name = f"app_{uuid.uuid4().hex[:10]}"
    async with await psycopg.AsyncConnection.connect(pg_admin_url, autocommit=True) as conn:
        await conn.execute(f'CREATE DATABASE "{name}"')
    info = psycopg.conninfo.conninfo_to_dict(pg_admin_url)
    info["dbname"] = name
    yield psycopg.conninfo.make_conninfo(**info)  # type: ignore[arg-type]
    async with await psycopg.AsyncConnection.connect(pg_admin_url, autocommit=True) as conn:
        await conn.execute(f'DROP DATABASE "{name}" WITH (FORCE)')


@contextlib.asynccontextmanager
async def agent_session(server: Any, w: World) -> AsyncIterator[AgentSession]:
    runner, issued = await w.store.admin.create_runner(Operator(w.workspace_id), "laptop")
    await w.store.admin.assign_agent(Operator(w.workspace_id), runner.runner_id, w.agent.account_id)
    session = AgentSession(
        Relay(f"127.0.0.1:{server.grpc_port}", issued.secret), str(w.agent.account_id)
    )
    await session.start()
    await session.bound()
    try:
        yield session
    finally:
        await session.close()


async def open_asks(w: World, n: int) -> list[Ask]:
    async with asyncio.timeout(30):
        while True:
            page = await w.store.list_messages(w.human, w.channel.channel_id, 200, "")
            asks = [b for m in page.items for b in m.blocks if isinstance(b, Ask) and b.is_open]
            if len(asks) >= n:
                return sorted(asks, key=lambda a: a.questions[0].question)
            await asyncio.sleep(0.05)


# --- LangGraph ---------------------------------------------------------------------


class Plan(TypedDict):
    said: Annotated[list[str], operator.add]


def two_questions() -> Any:
    from langgraph.graph import END, START, StateGraph
    from langgraph.types import interrupt

    def region(state: Plan) -> dict[str, list[str]]:
        answer = interrupt({"question": "Which region?", "options": ["eu-west", "us-east"]})
        return {"said": [f"region={answer}"]}

    def window(state: Plan) -> dict[str, list[str]]:
        answer = interrupt("When may it restart?")
        return {"said": [f"window={answer}"]}

    graph = StateGraph(Plan)
    graph.add_node("region", region)
    graph.add_node("window", window)
    graph.add_edge(START, "region")
    graph.add_edge(START, "window")
    graph.add_edge("region", END)
    graph.add_edge("window", END)
    return graph


async def test_a_graph_paused_at_two_interrupts_resumes_after_a_restart(
    server: Any, api_world: World, app_db: str
) -> None:
    from langgraph.checkpoint.postgres.aio import AsyncPostgresSaver

    w = api_world
    config = {"configurable": {"thread_id": "deploy-1"}}
    async with AsyncPostgresSaver.from_conn_string(app_db) as saver:
        await saver.setup()
        graph = two_questions().compile(checkpointer=saver)
        async with agent_session(server, w) as session:
            hitl = CompassInterrupts(session, str(w.channel.channel_id), app_db)
            await hitl.setup()
            first = asyncio.ensure_future(hitl.run(graph, {"said": []}, config))
            asks = await open_asks(w, 2)
            assert [a.questions[0].question for a in asks] == [
                "When may it restart?",
                "Which region?",
            ]
            # The waiting process stops; a person answers one ask meanwhile.
            first.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await first
        window, region = asks
        await w.store.answer(w.human, region.ask_id, [Answer("1", ("1",))])
        async with agent_session(server, w) as session:
            hitl = CompassInterrupts(session, str(w.channel.channel_id), app_db)
            again = asyncio.ensure_future(hitl.run(graph, None, config))
            await asyncio.sleep(0.5)
            # Nothing was asked twice.
            assert [a.ask_id for a in await open_asks(w, 1)] == [window.ask_id]
            await w.store.answer(w.human, window.ask_id, [Answer("1", (), "after 22:00")])
            values = await again
    assert sorted(values["said"]) == ["region=us-east", "window=after 22:00"]
    async with await psycopg.AsyncConnection.connect(app_db) as conn:
        cur = await conn.execute("SELECT count(*) FROM compass_interrupts")
        assert await cur.fetchone() == (0,)


async def test_human_in_the_loop_middleware_decisions(
    server: Any, api_world: World, app_db: str
) -> None:
    from langchain.agents import create_agent
    from langchain.agents.middleware import HumanInTheLoopMiddleware
    from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
    from langchain_core.messages import AIMessage
    from langgraph.checkpoint.postgres.aio import AsyncPostgresSaver

    ran: list[tuple[str, dict[str, Any]]] = []

    def deploy(service: str) -> str:
        """Deploy a service."""
        ran.append(("deploy", {"service": service}))
        return f"deployed {service}"

    def drop_table(table: str) -> str:
        """Drop a table."""
        ran.append(("drop_table", {"table": table}))
        return f"dropped {table}"

    class Scripted(GenericFakeChatModel):
        def bind_tools(self, tools: Any, **kwargs: Any) -> Any:
            return self

    model = Scripted(
        messages=iter(
            [
                AIMessage(
                    content="",
                    tool_calls=[
                        {"name": "deploy", "args": {"service": "api"}, "id": "c1"},
                        {"name": "drop_table", "args": {"table": "users"}, "id": "c2"},
                    ],
                ),
                AIMessage(content="done"),
            ]
        )
    )
    w = api_world
    config = {"configurable": {"thread_id": "agent-1"}}
    async with AsyncPostgresSaver.from_conn_string(app_db) as saver:
        await saver.setup()
        agent = create_agent(
            model,
            tools=[deploy, drop_table],
            middleware=[
                HumanInTheLoopMiddleware(
                    interrupt_on={
                        "deploy": {"allowed_decisions": ["approve", "edit", "reject"]},
                        "drop_table": {"allowed_decisions": ["approve", "reject"]},
                    }
                )
            ],
            checkpointer=saver,
        )
        async with agent_session(server, w) as session:
            hitl = CompassInterrupts(session, str(w.channel.channel_id), app_db)
            await hitl.setup()
            run = asyncio.ensure_future(
                hitl.run(agent, {"messages": [{"role": "user", "content": "ship it"}]}, config)
            )
            (ask,) = await open_asks(w, 1)
            assert [[o.label for o in q.options] for q in ask.questions] == [
                ["Approve", "Edit", "Reject"],
                ["Approve", "Reject"],
            ]
            await w.store.answer(
                w.human,
                ask.ask_id,
                [
                    Answer("1", ("edit",), json.dumps({"service": "api-canary"})),
                    Answer("2", ("reject",), "never on Fridays"),
                ],
            )
            values = await run
    assert ran == [("deploy", {"service": "api-canary"})]
    said = {m.tool_call_id: m.content for m in values["messages"] if m.type == "tool"}
    assert said["c1"].endswith("Tool response:\ndeployed api-canary")
    assert (
        said["c2"] == "User rejected the tool call for `drop_table` with reason: never on Fridays"
    )


# --- OpenAI Agents SDK --------------------------------------------------------------


async def test_an_agents_sdk_approval_through_compass(
    server: Any, api_world: World, app_db: str, tmp_path: pathlib.Path
) -> None:
    from agents import Agent, ModelResponse, Usage, function_tool
    from agents.models.interface import Model
    from openai.types.responses import (
        ResponseFunctionToolCall,
        ResponseOutputMessage,
        ResponseOutputText,
    )

    ran: list[str] = []

    @function_tool(needs_approval=True)
    def clean(folder: str) -> str:
        """Remove a build folder."""
        ran.append(folder)
        return f"removed {folder}"

    class Scripted(Model):
        """A model that calls `clean` once, then says it is done."""

        def __init__(self) -> None:
            self.turns = 0

        async def get_response(self, *args: Any, **kwargs: Any) -> ModelResponse:
            self.turns += 1
            if self.turns == 1:
                call = ResponseFunctionToolCall(
                    arguments='{"folder": "build/"}',
                    call_id="call_1",
                    name="clean",
                    type="function_call",
                    id="fc_1",
                    status="completed",
                )
                return ModelResponse(output=[call], usage=Usage(), response_id=None)
            text = ResponseOutputText(annotations=[], text="all clean", type="output_text")
            message = ResponseOutputMessage(
                id="msg_1", content=[text], role="assistant", status="completed", type="message"
            )
            return ModelResponse(output=[message], usage=Usage(), response_id=None)

        def stream_response(self, *args: Any, **kwargs: Any) -> Any:
            raise NotImplementedError

    w = api_world
    agent = Agent(name="janitor", instructions="", tools=[clean], model=Scripted())
    async with agent_session(server, w) as session:
        receipts = tmp_path / "job-1.compass-receipts.jsonl"
        approvals = CompassApprovals(session, str(w.channel.channel_id), app_db, receipts=receipts)
        await approvals.setup()
        run = asyncio.ensure_future(approvals.run(agent, "clean up", key="job-1"))
        (ask,) = await open_asks(w, 1)
        assert ask.questions[0].question == (
            'janitor asks to call clean with {"folder": "build/"}. Approve it?'
        )
        # The waiting process stops before anyone answers; a new one resumes.
        run.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await run
        await w.store.answer(w.human, ask.ask_id, [Answer("1", ("approve",))])
        result = await approvals.run(agent, None, key="job-1")
    assert ran == ["build/"]
    assert result.final_output == "all clean"
    # Its decision's receipt, beside the run, verifies against the server's keys.
    hook = pathlib.Path(sys.executable).parent / "compass-hook"
    checked = await asyncio.create_subprocess_exec(
        str(hook),
        "verify",
        str(receipts),
        "--url",
        f"http://127.0.0.1:{server.http_port}",
        stdout=asyncio.subprocess.PIPE,
    )
    out, _ = await checked.communicate()
    assert checked.returncode == 0
    assert out.decode().startswith(f"line 1: {ask.ask_id} answered by ada at ")
