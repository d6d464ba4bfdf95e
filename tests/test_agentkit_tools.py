"""The comms tools an agent is given: one per agent arm of CommsCallRequest,
none that answers an ask, arguments checked against each tool's own schema,
and the tool text an agent reads. Everything but the pure schema checks runs
through the agent kit's relay client against the real server."""

from __future__ import annotations

import asyncio
import datetime
import itertools
import re
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

import httpx
import pytest

from compass.v1 import agent_gateway_pb2 as gw
from compass.v1 import comms_pb2 as pb
from compass_agentkit import schema
from compass_agentkit.native_ask import START_EVENT, EventMapper, MappedAsk, answers_from_ask
from compass_agentkit.relay import Relay
from compass_agentkit.tools import SPECS, Tool, ToolError, comms_tools
from compass_server.store.types import TextBlock
from tests.relay_client import runner_for
from tests.servers import CallError, GrpcClient
from tests.world import World

# Agent arms that deliberately have no tool: arm → why. Empty today; an arm
# listed here needs a reason a reviewer can accept.
UNTOOLED: dict[str, str] = {}

TOOL_NAMES = [
    "comms_post_message",
    "comms_post_ask",
    "comms_cancel_ask",
    "comms_get_ask",
    "comms_list_messages",
    "comms_list_channels",
    "comms_get_message",
    "comms_search_messages",
    "comms_open_dm",
    "comms_create_channel",
    "comms_add_channel_member",
    "comms_update_topic",
    "comms_set_status",
    "comms_inbox_post",
    "comms_inbox_reply",
    "comms_inbox_close",
    "comms_spawn_agent",
]

WITHDREW = "Withdrew ask {}; no answer will arrive."
MARKER = re.compile(
    r'\[(ask|answered|declined|expired|withdrawn|withdrawn-by-owner|answer) (\w+) id="([^"]*)"\]'
)

NATIVE_ASK: dict[str, Any] = {
    "channel_id": "",  # filled per test
    "text": "Two decisions before I start.",
    "questions": [
        {
            "id": "db",
            "question": "Which database?",
            "header": "Storage",
            "options": [
                {"label": "PostgreSQL", "description": "what we run"},
                {"label": "SQLite", "preview": "file.db"},
            ],
            "recommended": 0,
        },
        {
            "id": "langs",
            "question": "Which languages?",
            "options": [{"label": "Python"}, {"label": "Go"}, {"label": "TS"}],
            "multi": True,
        },
    ],
}


_ASKED = itertools.count(1)


def another_ask(channel: str) -> dict[str, Any]:
    """NATIVE_ASK in the channel, told apart from the others by its chip (which
    renders nowhere): the same questions while one is open would be that ask."""
    first, *rest = NATIVE_ASK["questions"]
    chip = {**first, "header": f"Storage {next(_ASKED)}"}
    return {**NATIVE_ASK, "channel_id": channel, "questions": [chip, *rest]}


# --- a pure fake caller: schema and format checks only ------------------------


@dataclass
class Recorder:
    """Records requests and answers each with a fixed result (or passes it on)."""

    answer: gw.CommsCallResult | None = None
    forward: Callable[[gw.CommsCallRequest], Awaitable[gw.CommsCallResult]] | None = None
    requests: list[gw.CommsCallRequest] = field(default_factory=list)

    async def __call__(self, request: gw.CommsCallRequest) -> gw.CommsCallResult:
        self.requests.append(request)
        if self.forward is not None:
            return await self.forward(request)
        assert self.answer is not None
        return self.answer


def tool(tools: list[Tool], name: str) -> Tool:
    return next(t for t in tools if t.name == name)


def ask_id_of(post_ask_text: str) -> str:
    """The minted id, as the agent reads it from comms_post_ask's text."""
    found = re.search(r'ask id="([^"]+)"', post_ask_text)
    assert found, post_ask_text
    return found.group(1)


# --- the real server through the agent kit's relay ----------------------------


@dataclass
class Lane:
    w: World
    sent: Recorder  # passes every request on to the real hub and records it
    tools: dict[str, Tool]
    grpc: GrpcClient
    http_port: int

    @property
    def channel(self) -> str:
        return str(self.w.channel.channel_id)

    async def run(self, name: str, args: dict[str, Any]) -> str:
        return await self.tools[name].handler(args)

    async def as_ada(self, method: str, request: Any) -> Any:
        return await self.grpc.call(method, request, self.w.tokens[self.w.human.account_id])

    async def post_ask(self, **extra: Any) -> str:
        return ask_id_of(await self.run("comms_post_ask", {**another_ask(self.channel), **extra}))

    async def ada_answers(self, ask_id: str) -> None:
        await self.as_ada(
            "RespondToAsk",
            pb.RespondToAskRequest(
                ask_id=ask_id,
                answers=[
                    pb.AskQuestionAnswer(question_id="db", chosen_option_ids=["0"]),
                    pb.AskQuestionAnswer(question_id="langs", custom_text="Rust"),
                ],
            ),
        )

    async def ada_inbox(self, method: str, body: dict[str, Any]) -> Any:
        """ada, who owns scout, on InboxService over Connect JSON."""
        async with httpx.AsyncClient(timeout=30) as http:
            response = await http.post(
                f"http://127.0.0.1:{self.http_port}/compass.v1.InboxService/{method}",
                json=body,
                headers={"authorization": f"Bearer {self.w.tokens[self.w.human.account_id]}"},
            )
        assert response.status_code == 200, response.text
        return response.json()

    async def ada_inbox_item(self, key: str) -> dict[str, Any]:
        listed = await self.ada_inbox("ListInboxItems", {})
        [item] = [i for i in listed.get("items", []) if i["key"] == key]
        return item  # type: ignore[no-any-return]

    async def ada_reads(self, message_id: str) -> pb.Message:
        got = await self.as_ada("GetMessage", pb.GetMessageRequest(message_id=message_id))
        return got.message  # type: ignore[no-any-return]


@pytest.fixture
async def lane(server: Any, api_world: World) -> AsyncIterator[Lane]:
    token = await runner_for(api_world)
    relay = Relay(f"127.0.0.1:{server.grpc_port}", token)
    await relay.start()

    async def heard(event: pb.Event) -> None:
        del event  # these tests read through the tools, not the delivery lane

    session = await relay.bind(str(api_world.agent.account_id), heard)
    sent = Recorder(forward=relay.caller(session.session_id))
    grpc = GrpcClient(server.grpc_port)
    yield Lane(api_world, sent, {t.name: t for t in comms_tools(sent)}, grpc, server.http_port)
    await relay.close()
    await grpc.close()


# --- the tool list ---------------------------------------------------------------


def test_the_tools_are_one_per_agent_action_and_none_answers_an_ask() -> None:
    tools = comms_tools(Recorder(gw.CommsCallResult()))
    assert sorted(t.name for t in tools) == sorted(TOOL_NAMES)
    for t in tools:
        assert "respond" not in t.name and "answer" not in t.name.replace("_ask", "")
        assert t.arm != "respond_to_ask"
    # The request oneof can't even express an answer.
    call = gw.CommsCallRequest.DESCRIPTOR.oneofs_by_name["call"]
    assert all(f.message_type.name != "RespondToAskRequest" for f in call.fields)


def test_every_agent_arm_has_a_tool() -> None:
    """Adding an arm to CommsCallRequest.call fails here until a tool sends it
    (a row in tools.SPECS) or UNTOOLED names it with a reason."""
    arms = [f.name for f in gw.CommsCallRequest.DESCRIPTOR.oneofs_by_name["call"].fields]
    tooled = {spec.arm for spec in SPECS}
    missing = [a for a in arms if a not in tooled and a not in UNTOOLED]
    assert not missing, (
        f"CommsCallRequest arms with no agent tool: {missing}. Add a ToolSpec row to "
        "agentkit/compass_agentkit/tools.py SPECS (and a scenario to "
        "test_every_tool_works_against_the_real_server), or list the arm in UNTOOLED with "
        "the reason it has no tool."
    )
    assert all(reason.strip() for reason in UNTOOLED.values())
    assert not set(UNTOOLED) - set(arms), "UNTOOLED names an arm that does not exist"
    assert not tooled - set(arms), "a tool sends an arm CommsCallRequest does not have"
    assert not tooled & set(UNTOOLED), "an arm has a tool and is listed as untooled"
    assert len({spec.name for spec in SPECS}) == len(SPECS)


def test_every_tool_has_a_label_and_an_approval_class() -> None:
    labels = [spec.label for spec in SPECS]
    assert all(label and len(label) <= 40 for label in labels)
    assert len(set(labels)) == len(labels)
    cancel = next(spec for spec in SPECS if spec.name == "comms_cancel_ask")
    assert (cancel.label, cancel.approval, cancel.destructive) == (
        "Withdraw channel ask",
        "write",
        True,
    )
    for spec in SPECS:
        assert spec.approval in ("read", "write"), spec.name
        # A read asks for something; anything else changes what people see.
        reads = spec.arm.startswith(("get_", "list_", "search_"))
        assert (spec.approval == "read") == reads, spec.name
        assert not (spec.approval == "read" and spec.destructive), spec.name


async def test_a_read_tool_changes_nothing_people_see(lane: Lane) -> None:
    ask_id = await lane.post_ask()
    posted = await lane.run("comms_post_message", {"channel_id": lane.channel, "text": "hi"})
    message_id = re.search(r"Posted message (\S+) in", posted)
    assert message_id
    calls = {
        "comms_get_ask": {"ask_id": ask_id},
        "comms_list_messages": {"channel_id": lane.channel},
        "comms_list_channels": {},
        "comms_get_message": {"message_id": message_id.group(1)},
        "comms_search_messages": {"query": "hi"},
    }
    assert set(calls) == {spec.name for spec in SPECS if spec.approval == "read"}
    mark = await lane.w.store.last_event_id(lane.w.human)
    for name, args in calls.items():
        await lane.run(name, args)
    assert await lane.w.store.last_event_id(lane.w.human) == mark


def test_every_tool_definition_is_well_formed() -> None:
    for t in comms_tools(Recorder(gw.CommsCallResult())):
        d = t.definition()
        assert set(d) == {"name", "description", "parameters"}
        assert re.fullmatch(r"comms_[a-z_]+", d["name"])
        assert d["description"].strip()
        params = d["parameters"]
        assert params["type"] == "object"
        assert params["additionalProperties"] is False
        assert set(params.get("required", [])) <= set(params["properties"])
        schema.check_schema(params)  # only keywords the handler's validator enforces


def test_every_id_parameter_refuses_blank() -> None:
    def ids(node: Any, path: str) -> list[tuple[str, Any]]:
        found = []
        if isinstance(node, dict):
            for key, sub in node.get("properties", {}).items():
                if key.endswith("_id") or key == "id":
                    found.append((f"{path}.{key}", sub))
                found += ids(sub, f"{path}.{key}")
            if "items" in node:
                found += ids(node["items"], f"{path}[]")
                if path.endswith("_ids"):
                    found.append((f"{path}[]", node["items"]))
        return found

    checked = 0
    for t in comms_tools(Recorder(gw.CommsCallResult())):
        for path, sub in ids(t.parameters, t.name):
            assert sub["minLength"] == 1, path
            assert sub["pattern"] == schema.NOT_BLANK, path
            for blank in ["", " ", "\t\n "]:
                assert schema.errors(sub, blank), (path, blank)
            assert not schema.errors(sub, "a-1"), path
            checked += 1
    assert checked >= 12


def test_the_cancel_tool_schema_refuses_a_blank_ask_id() -> None:
    cancel = tool(comms_tools(Recorder(gw.CommsCallResult())), "comms_cancel_ask")
    ask_id = cancel.parameters["properties"]["ask_id"]
    assert ask_id["type"] == "string" and ask_id["minLength"] == 1
    assert re.search(ask_id["pattern"], "   ") is None
    assert re.search(ask_id["pattern"], " x ") is not None
    assert cancel.parameters["required"] == ["ask_id"]


@pytest.mark.parametrize(
    ("args", "why"),
    [
        ({"ask_id": ""}, "ask_id must not be blank"),
        ({"ask_id": "  \t"}, "ask_id must not be blank"),
        ({}, "ask_id is required"),
        ({"ask_id": 7}, "ask_id must be a string"),
        ({"ask_id": "a", "reason": "x"}, "reason is not a parameter"),
        ("ask-1", "the arguments must be an object"),
    ],
)
async def test_the_cancel_handler_checks_its_arguments_and_sends_nothing(
    args: Any, why: str
) -> None:
    sent = Recorder(gw.CommsCallResult(cancel_ask=gw.CancelAskResponse()))
    with pytest.raises(ToolError) as failed:
        await tool(comms_tools(sent), "comms_cancel_ask").handler(args)
    assert str(failed.value) == f"comms_cancel_ask failed: invalid_argument: {why}"
    assert sent.requests == []


def test_the_validator_enforces_each_keyword() -> None:
    s = {
        "type": "object",
        "properties": {
            "n": {"type": "integer", "minimum": 1, "maximum": 3},
            "b": {"type": "boolean"},
            "e": {"type": "string", "enum": ["idle", "working"]},
            "l": {"type": "array", "items": {"type": "string"}, "minItems": 1, "maxItems": 2},
            "s": {"type": "string", "maxLength": 3},
        },
        "required": ["n"],
        "additionalProperties": False,
    }
    schema.check_schema(s)
    assert schema.errors(s, {"n": 2, "b": True, "e": "idle", "l": ["x"], "s": "abc"}) == []
    assert schema.errors(s, {"n": 0}) == ["n must be at least 1"]
    assert schema.errors(s, {"n": 4}) == ["n must be at most 3"]
    assert schema.errors(s, {"n": True}) == ["n must be an integer"]
    assert schema.errors(s, {"n": 1.5}) == ["n must be an integer"]
    assert schema.errors(s, {"n": 1, "b": 1}) == ["b must be a boolean"]
    assert schema.errors(s, {"n": 1, "e": "busy"}) == ['e must be one of "idle", "working"']
    assert schema.errors(s, {"n": 1, "l": []}) == ["l must have at least 1 item(s)"]
    assert schema.errors(s, {"n": 1, "l": ["a", "b", "c"]}) == ["l must have at most 2 item(s)"]
    assert schema.errors(s, {"n": 1, "l": ["a", 2]}) == ["l[1] must be a string"]
    assert schema.errors(s, {"n": 1, "s": "abcd"}) == ["s must be at most 3 characters"]
    # JSON can carry a lone surrogate; protobuf strings can't.
    assert schema.errors({"type": "string"}, "\ud800") == ["the value must be valid text"]
    # Nor can Compass store a NUL.
    assert schema.errors({"type": "string"}, "a\x00") == [
        "the value must not contain NUL characters"
    ]
    with pytest.raises(ValueError, match="format"):
        schema.check_schema({"type": "string", "format": "uuid"})


async def test_a_definition_is_a_copy_the_caller_may_change() -> None:
    sent = Recorder(gw.CommsCallResult(cancel_ask=gw.CancelAskResponse()))
    cancel = tool(comms_tools(sent), "comms_cancel_ask")
    shown = cancel.definition()["parameters"]["properties"]["ask_id"]
    shown["minLength"] = 0
    del shown["pattern"]
    with pytest.raises(ToolError, match="ask_id must not be blank"):
        await cancel.handler({"ask_id": ""})
    with pytest.raises(ToolError, match="text must be valid text"):
        await tool(comms_tools(sent), "comms_post_message").handler(
            {"channel_id": "c", "text": "\ud800"}
        )
    assert sent.requests == []


def test_the_post_ask_description_says_how_to_revise() -> None:
    post = tool(comms_tools(Recorder(gw.CommsCallResult())), "comms_post_ask")
    assert (
        "To revise an ask, post the new one first, then withdraw the old one with "
        "comms_cancel_ask." in post.description
    )
    cancel = tool(comms_tools(Recorder(gw.CommsCallResult())), "comms_cancel_ask")
    assert "already_exists" in cancel.description and "later turn" in cancel.description


# --- cancel, against the real server ---------------------------------------------


async def test_cancel_sends_the_cancel_arm_and_withdraws_also_on_repeat(lane: Lane) -> None:
    ask_id = await lane.post_ask()
    posted = lane.sent.requests[-1].post_ask
    assert posted.ask.questions[0].question_id == "db"

    assert await lane.run("comms_cancel_ask", {"ask_id": ask_id}) == WITHDREW.format(ask_id)
    request = lane.sent.requests[-1]
    assert request.WhichOneof("call") == "cancel_ask"
    assert request.cancel_ask.ask_id == ask_id

    # The repeat is a success too: a retried tool call never turns into a failure.
    assert await lane.run("comms_cancel_ask", {"ask_id": ask_id}) == WITHDREW.format(ask_id)
    found = await lane.as_ada("SearchMessages", pb.SearchMessagesRequest(query="Which database"))
    [message] = [m for m in found.messages if m.blocks[-1].ask.ask_id == ask_id]
    assert message.blocks[-1].ask.cancelled and not message.blocks[-1].ask.answered


async def test_cancel_after_the_answer_fails_saying_the_answer_won(lane: Lane) -> None:
    ask_id = await lane.post_ask()
    await lane.ada_answers(ask_id)
    with pytest.raises(ToolError) as failed:
        await lane.run("comms_cancel_ask", {"ask_id": ask_id})
    text = str(failed.value)
    assert text.startswith("comms_cancel_ask failed: already_exists: ")
    assert "is already answered" in text  # the server's words
    assert "already ended some other way" in text and "later turn" in text
    assert (failed.value.tool, failed.value.code) == ("comms_cancel_ask", "already_exists")


async def test_cancel_of_an_unknown_ask_fails_with_the_servers_code(lane: Lane) -> None:
    with pytest.raises(ToolError) as failed:
        await lane.run("comms_cancel_ask", {"ask_id": "no-such-ask"})
    assert str(failed.value).startswith("comms_cancel_ask failed: not_found: ")


# --- the list view's markers -------------------------------------------------------


async def test_list_messages_marks_every_ask_with_its_id(lane: Lane) -> None:
    open_id = await lane.post_ask()
    answered_id = await lane.post_ask()
    withdrawn_id = await lane.post_ask()
    await lane.ada_answers(answered_id)
    await lane.run("comms_cancel_ask", {"ask_id": withdrawn_id})

    text = await lane.run("comms_list_messages", {"channel_id": lane.channel})
    fence = re.search(r"fence (\w+)", text.splitlines()[0])
    assert fence, text
    f = fence.group(1)
    assert f'[ask {f} id="{open_id}"] Which database?' in text
    assert f'[ask {f} id="{open_id}"] Which languages?' in text
    assert f'[answered {f} id="{answered_id}"] Which database? → PostgreSQL' in text
    assert f'[answered {f} id="{answered_id}"] Which languages? → other: Rust' in text
    assert f'[answer {f} id="{answered_id}"] Which database? → PostgreSQL' in text
    assert f'[withdrawn {f} id="{withdrawn_id}"] Which database?' in text
    assert f'[ask {f} id="{withdrawn_id}"]' not in text
    # Oldest first: the open ask was posted first.
    assert text.index(f'id="{open_id}"') < text.index(f'id="{withdrawn_id}"')
    assert {m.group(2) for m in MARKER.finditer(text)} == {f}


async def test_an_id_read_from_a_listed_marker_is_the_id_cancel_sends(lane: Lane) -> None:
    await lane.post_ask()
    text = await lane.run("comms_list_messages", {"channel_id": lane.channel})
    f = re.search(r"fence (\w+)", text).group(1)  # type: ignore[union-attr]
    [listed] = {m.group(3) for m in MARKER.finditer(text) if m.group(1) == "ask"}
    assert listed and m_fence_ok(text, f)

    assert await lane.run("comms_cancel_ask", {"ask_id": listed}) == WITHDREW.format(listed)
    assert lane.sent.requests[-1].cancel_ask.ask_id == listed
    # The server withdrew exactly the ask the marker named.
    again = await lane.run("comms_list_messages", {"channel_id": lane.channel})
    g = re.search(r"fence (\w+)", again).group(1)  # type: ignore[union-attr]
    assert f'[withdrawn {g} id="{listed}"] Which database?' in again


def m_fence_ok(text: str, fence: str) -> bool:
    return all(m.group(2) == fence for m in MARKER.finditer(text))


# --- post_ask: the native shape ----------------------------------------------------


async def test_post_ask_maps_the_native_shape_onto_one_ask(lane: Lane) -> None:
    text = await lane.run("comms_post_ask", {**NATIVE_ASK, "channel_id": lane.channel})
    ask_id = ask_id_of(text)
    assert f'ask id="{ask_id}"' in text and "later turn" in text
    message_id = re.search(r"message (\S+?)[ .)]", text).group(1)  # type: ignore[union-attr]
    message = await lane.ada_reads(message_id)
    assert [b.WhichOneof("block") for b in message.blocks] == ["text", "ask"]
    assert message.blocks[0].text.text == "Two decisions before I start."
    ask = message.blocks[1].ask
    assert ask.ask_id == ask_id
    db, langs = ask.questions
    assert (db.question_id, db.header, db.allow_multiple, db.recommended) == (
        "db",
        "Storage",
        False,
        0,
    )
    assert [(o.id, o.label, o.description, o.preview) for o in db.options] == [
        ("0", "PostgreSQL", "what we run", ""),
        ("1", "SQLite", "", "file.db"),
    ]
    assert langs.allow_multiple and not langs.HasField("recommended")
    assert [o.label for o in langs.options] == ["Python", "Go", "TS"]


async def test_an_out_of_range_recommendation_still_reaches_people(lane: Lane) -> None:
    """Out of range only means nothing is recommended: the ask is posted, the
    markers read as any open ask, and the answer maps back by its ids."""
    questions = [
        {**NATIVE_ASK["questions"][0], "recommended": 5},
        {**NATIVE_ASK["questions"][1], "recommended": -1},
    ]
    text = await lane.run(
        "comms_post_ask", {**NATIVE_ASK, "channel_id": lane.channel, "questions": questions}
    )
    ask_id = ask_id_of(text)
    listed = await lane.run("comms_list_messages", {"channel_id": lane.channel})
    assert [(m.group(1), m.group(3)) for m in MARKER.finditer(listed)] == [("ask", ask_id)] * 2
    await lane.ada_answers(ask_id)
    message_id = re.search(r"message (\S+?)[ .)]", text).group(1)  # type: ignore[union-attr]
    ask = (await lane.ada_reads(message_id)).blocks[1].ask
    assert [q.recommended for q in ask.questions] == [5, -1]
    assert [(r.question_id, r.selected_options, r.custom_input) for r in answers_from_ask(ask)] == [
        ("db", ["PostgreSQL"], None),
        ("langs", [], "Rust"),
    ]


@pytest.mark.parametrize(
    ("questions", "why"),
    [
        (
            [
                {"id": "a", "question": "A?", "options": []},
                {"id": "a", "question": "B?", "options": []},
            ],
            "questions[1].id repeats questions[0].id",
        ),
        ([], "questions must have at least 1 item(s)"),
        ([{"id": "a", "question": "A?"}], "questions[0].options is required"),
        ([{"id": " ", "question": "A?", "options": []}], "questions[0].id must not be blank"),
        (
            [{"id": "a", "question": "A?", "options": [{"label": 3}]}],
            "questions[0].options[0].label must be a string",
        ),
    ],
)
async def test_a_malformed_ask_is_a_tool_failure_and_posts_nothing(
    lane: Lane, questions: list[Any], why: str
) -> None:
    with pytest.raises(ToolError) as failed:
        await lane.run("comms_post_ask", {"channel_id": lane.channel, "questions": questions})
    assert str(failed.value) == f"comms_post_ask failed: invalid_argument: {why}"
    assert lane.sent.requests == []
    listed = await lane.as_ada("ListMessages", pb.ListMessagesRequest(channel_id=lane.channel))
    assert list(listed.messages) == []


# --- post_ask: a deadline and named answerers ------------------------------------------


def message_id_of(post_ask_text: str) -> str:
    found = re.search(r"in message (\S+) ", post_ask_text)
    assert found, post_ask_text
    return found.group(1)


async def test_post_ask_carries_a_deadline_and_the_people_it_names(lane: Lane) -> None:
    ada = str(lane.w.human.account_id)
    before = datetime.datetime.now(datetime.UTC)
    text = await lane.run(
        "comms_post_ask",
        {
            **NATIVE_ASK,
            "channel_id": lane.channel,
            "deadline_seconds": 3600,
            "answerer_account_ids": [ada],
        },
    )
    ask = (await lane.ada_reads(message_id_of(text))).blocks[-1].ask
    deadline = ask.deadline.ToDatetime(datetime.UTC)
    assert before + datetime.timedelta(seconds=3590) < deadline
    assert deadline < before + datetime.timedelta(seconds=3610)
    assert (list(ask.answerer_account_ids), list(ask.answerer_handles)) == ([ada], ["ada"])
    assert lane.sent.requests[-1].post_ask.ask.timeout.seconds == 3600
    shown = deadline.strftime("%Y-%m-%dT%H:%M:%SZ")
    assert f"Only @ada may answer or decline it. If nobody answers by {shown}, it expires." in text

    # An absolute time, with its offset, is the deadline exactly.
    at = (before + datetime.timedelta(hours=2)).replace(microsecond=0)
    local = at.astimezone(datetime.timezone(datetime.timedelta(hours=2)))
    text = await lane.run(
        "comms_post_ask", {**NATIVE_ASK, "channel_id": lane.channel, "deadline": local.isoformat()}
    )
    ask = (await lane.ada_reads(message_id_of(text))).blocks[-1].ask
    assert ask.deadline.ToDatetime(datetime.UTC) == at
    assert not ask.answerer_account_ids
    assert f"If nobody answers by {at.strftime('%Y-%m-%dT%H:%M:%SZ')}, it expires." in text


@pytest.mark.parametrize(
    ("extra", "why"),
    [
        (
            {"deadline_seconds": 3600, "deadline": "2030-01-01T00:00:00Z"},
            "set deadline or deadline_seconds, not both",
        ),
        ({"deadline": "tomorrow"}, "deadline must be an RFC 3339 time with its offset"),
        ({"deadline": "2030-01-01T00:00:00"}, "deadline must be an RFC 3339 time with its offset"),
        ({"deadline": "2030-02-30T00:00:00Z"}, "deadline must be an RFC 3339 time with its offset"),
        ({"deadline_seconds": 0}, "deadline_seconds must be at least 1"),
        ({"answerer_account_ids": [" "]}, "answerer_account_ids[0] must not be blank"),
    ],
)
async def test_a_malformed_deadline_or_answerer_is_refused_before_anything_is_sent(
    lane: Lane, extra: dict[str, Any], why: str
) -> None:
    with pytest.raises(ToolError) as failed:
        await lane.run("comms_post_ask", {**NATIVE_ASK, "channel_id": lane.channel, **extra})
    assert str(failed.value).startswith(f"comms_post_ask failed: invalid_argument: {why}")
    assert lane.sent.requests == []


async def test_a_deadline_or_answerer_the_server_refuses_posts_nothing(lane: Lane) -> None:
    for extra in (
        {"deadline_seconds": 40 * 86_400},
        {"deadline": "2001-01-01T00:00:00Z"},
        # grace is a person of the workspace, but not of this channel.
        {"answerer_account_ids": [str(lane.w.other_human.account_id)]},
        {"answerer_account_ids": [str(lane.w.agent.account_id)]},
    ):
        with pytest.raises(ToolError) as failed:
            await lane.run("comms_post_ask", {**NATIVE_ASK, "channel_id": lane.channel, **extra})
        assert str(failed.value).startswith("comms_post_ask failed: invalid_argument: "), extra
    listed = await lane.as_ada("ListMessages", pb.ListMessagesRequest(channel_id=lane.channel))
    assert list(listed.messages) == []


async def test_every_ending_reads_in_the_tools_the_agent_has(lane: Lane) -> None:
    declined = await lane.post_ask()
    await lane.as_ada(
        "DeclineAsk", pb.DeclineAskRequest(ask_id=declined, reason="not before the audit")
    )
    withdrawn = await lane.post_ask()
    await lane.as_ada("WithdrawAsk", pb.WithdrawAskRequest(ask_id=withdrawn))
    expiring = await lane.post_ask(deadline_seconds=1)
    mine = await lane.post_ask()
    await lane.run("comms_cancel_ask", {"ask_id": mine})

    assert await lane.run("comms_get_ask", {"ask_id": declined}) == (
        f'Ask {declined} was declined by @ada: "not before the audit". Nobody answered it; '
        "it takes no answer."
    )
    assert await lane.run("comms_get_ask", {"ask_id": withdrawn}) == (
        f"Ask {withdrawn} was withdrawn by @ada, the owner of the agent that asked; it takes "
        "no answer."
    )
    assert await lane.run("comms_get_ask", {"ask_id": mine}) == (
        f"Ask {mine} was withdrawn; it takes no answer."
    )
    for _ in range(150):  # the expiry loop wakes at the deadline it was told of
        text = await lane.run("comms_get_ask", {"ask_id": expiring})
        if "expired" in text:
            break
        await asyncio.sleep(0.2)
    assert re.fullmatch(
        rf"Ask {expiring} expired at \S+Z: nobody answered it before its deadline; it takes no "
        "answer.",
        text,
    )

    listed = await lane.run("comms_list_messages", {"channel_id": lane.channel})
    f = re.search(r"fence (\w+)", listed).group(1)  # type: ignore[union-attr]
    assert (
        f'[declined {f} id="{declined}"] Which database? (declined by @ada: not before the audit)'
        in listed
    )
    assert f'[declined {f} id="{declined}"] Which languages?\n' in listed
    assert (
        f'[withdrawn-by-owner {f} id="{withdrawn}"] Which database? (withdrawn by @ada, the '
        "owner of the agent that asked)" in listed
    )
    assert re.search(
        rf'\[expired {f} id="{expiring}"\] Which database\? \(nobody answered by \S+Z\)', listed
    )
    assert f'[withdrawn {f} id="{mine}"] Which database?\n' in listed

    # Each ended some other way first: a withdraw loses, saying so.
    for ask_id in (declined, withdrawn, expiring):
        with pytest.raises(ToolError) as failed:
            await lane.run("comms_cancel_ask", {"ask_id": ask_id})
        assert str(failed.value).startswith("comms_cancel_ask failed: already_exists: ")
        assert "already ended some other way" in str(failed.value)


async def test_a_native_ask_with_the_runtimes_timeout_expires_on_the_server(lane: Lane) -> None:
    mapped = EventMapper(ask_timeout_seconds=1).map(
        {"type": START_EVENT, "toolName": "ask", "toolCallId": "c1", "args": NATIVE_ASK}
    )
    [native] = mapped
    assert isinstance(native, MappedAsk)
    before = datetime.datetime.now(datetime.UTC)
    result = await lane.sent(
        gw.CommsCallRequest(post_ask=gw.PostAskRequest(channel_id=lane.channel, ask=native.ask))
    )
    posted = result.post_ask
    deadline = posted.message.blocks[-1].ask.deadline.ToDatetime(datetime.UTC)
    assert before < deadline < before + datetime.timedelta(seconds=5)
    for _ in range(150):
        got = await lane.sent(gw.CommsCallRequest(get_ask=gw.GetAskRequest(ask_id=posted.ask_id)))
        if got.get_ask.ask.ending.kind == pb.ASK_ENDING_KIND_EXPIRED:
            break
        await asyncio.sleep(0.2)
    assert [
        (r.question_id, r.selected_options, r.timed_out) for r in answers_from_ask(got.get_ask.ask)
    ] == [
        ("db", [], True),
        ("langs", [], True),
    ]


# --- every tool, once, against the real server -----------------------------------


Scenario = Callable[[Lane], Awaitable[None]]


async def s_post_message(ln: Lane) -> None:
    text = await ln.run("comms_post_message", {"channel_id": ln.channel, "text": "on it"})
    message_id = re.search(r"message (\S+) in", text).group(1)  # type: ignore[union-attr]
    message = await ln.ada_reads(message_id)
    assert message.blocks[0].text.text == "on it"
    assert message.author_account_id == str(ln.w.agent.account_id)
    with pytest.raises(ToolError, match="comms_post_message failed: invalid_argument: text"):
        await ln.run("comms_post_message", {"channel_id": ln.channel, "text": "  "})


async def s_post_ask(ln: Lane) -> None:
    ask_id = await ln.post_ask()
    presence = await ln.as_ada("GetPresence", pb.GetPresenceRequest())
    [scout] = [p for p in presence.presences if p.account_id == str(ln.w.agent.account_id)]
    assert scout.state == pb.PRESENCE_STATE_WAITING
    assert ask_id


async def s_cancel_ask(ln: Lane) -> None:
    ask_id = await ln.post_ask()
    assert await ln.run("comms_cancel_ask", {"ask_id": ask_id}) == WITHDREW.format(ask_id)


async def s_get_ask(ln: Lane) -> None:
    ask_id = await ln.post_ask()
    opened = await ln.run("comms_get_ask", {"ask_id": ask_id})
    assert opened.startswith(f"Ask {ask_id} is open: nobody has answered it yet.")
    assert "- Which database?" in opened
    await ln.ada_answers(ask_id)
    answered = await ln.run("comms_get_ask", {"ask_id": ask_id})
    assert answered == (
        f"Ask {ask_id} was answered:\n"
        "- Which database? → PostgreSQL\n"
        "- Which languages? → other: Rust"
    )
    withdrawn = await ln.post_ask()
    await ln.run("comms_cancel_ask", {"ask_id": withdrawn})
    assert await ln.run("comms_get_ask", {"ask_id": withdrawn}) == (
        f"Ask {withdrawn} was withdrawn; it takes no answer."
    )
    with pytest.raises(ToolError, match="comms_get_ask failed: not_found: "):
        await ln.run("comms_get_ask", {"ask_id": "ask_nope"})


async def s_list_messages(ln: Lane) -> None:
    await ln.w.store.append_message(ln.w.human, ln.w.channel.channel_id, [TextBlock("hi\nscout")])
    text = await ln.run("comms_list_messages", {"channel_id": ln.channel, "limit": 10})
    assert "@ada (" in text and "): hi\n  scout" in text
    assert text.splitlines()[0].startswith("1 message")


async def s_list_channels(ln: Lane) -> None:
    text = await ln.run("comms_list_channels", {})
    assert f"{ln.channel} #general" in text
    assert "2 members" in text


async def s_get_message(ln: Lane) -> None:
    m = await ln.w.store.append_message(ln.w.human, ln.w.channel.channel_id, [TextBlock("ping")])
    text = await ln.run("comms_get_message", {"message_id": str(m.message_id)})
    assert f"@ada ({m.message_id}): ping" in text
    with pytest.raises(ToolError, match=r"comms_get_message failed: (not_found|invalid_argument)"):
        await ln.run("comms_get_message", {"message_id": "nope"})


async def s_search_messages(ln: Lane) -> None:
    await ln.w.store.append_message(
        ln.w.human, ln.w.channel.channel_id, [TextBlock("the flamingo plan")]
    )
    text = await ln.run("comms_search_messages", {"query": "FLAMINGO"})
    assert "the flamingo plan" in text
    none = await ln.run("comms_search_messages", {"query": "zebra", "channel_id": ln.channel})
    assert none.startswith("No messages match")


async def s_open_dm(ln: Lane) -> None:
    text = await ln.run("comms_open_dm", {"account_id": str(ln.w.human.account_id)})
    channel_id = re.search(r"channel (\S+?)\.", text).group(1)  # type: ignore[union-attr]
    await ln.run("comms_post_message", {"channel_id": channel_id, "text": "psst"})
    listed = await ln.as_ada("ListMessages", pb.ListMessagesRequest(channel_id=channel_id))
    assert [m.blocks[0].text.text for m in listed.messages] == ["psst"]


async def s_create_channel(ln: Lane) -> None:
    text = await ln.run(
        "comms_create_channel",
        {"name": "ops", "topic": "pager", "member_account_ids": [str(ln.w.human.account_id)]},
    )
    channel_id = re.search(r"\(([^)]+)\)", text).group(1)  # type: ignore[union-attr]
    channels = await ln.as_ada("ListChannels", pb.ListChannelsRequest())
    [ops] = [c for c in channels.channels if c.channel_id == channel_id]
    assert (ops.name, ops.topic) == ("ops", "pager")


async def s_add_channel_member(ln: Lane) -> None:
    grace = str(ln.w.other_human.account_id)
    text = await ln.run("comms_add_channel_member", {"channel_id": ln.channel, "account_id": grace})
    assert grace in text
    channels = await ln.grpc.call(
        "ListChannels", pb.ListChannelsRequest(), ln.w.tokens[ln.w.other_human.account_id]
    )
    assert ln.channel in [c.channel_id for c in channels.channels]


async def s_update_topic(ln: Lane) -> None:
    await ln.run("comms_update_topic", {"channel_id": ln.channel, "topic": "ship it"})
    channels = await ln.as_ada("ListChannels", pb.ListChannelsRequest())
    [general] = [c for c in channels.channels if c.channel_id == ln.channel]
    assert general.topic == "ship it"


async def s_set_status(ln: Lane) -> None:
    text = await ln.run("comms_set_status", {"state": "working", "text": "reading logs"})
    assert "working" in text and "reading logs" in text
    presence = await ln.as_ada("GetPresence", pb.GetPresenceRequest())
    [scout] = [p for p in presence.presences if p.account_id == str(ln.w.agent.account_id)]
    assert (scout.state, scout.status_text) == (pb.PRESENCE_STATE_WORKING, "reading logs")
    with pytest.raises(ToolError, match='state must be one of "idle", "working"'):
        await ln.run("comms_set_status", {"state": "waiting"})


async def s_inbox_post(ln: Lane) -> None:
    text = await ln.run(
        "comms_inbox_post",
        {
            "key": "deploy",
            "title": "Deploy?",
            "body": "Ready.",
            "questions": NATIVE_ASK["questions"],
        },
    )
    ask_id = ask_id_of(text)
    assert 'inbox item "deploy"' in text and "later turn" in text
    item = await ln.ada_inbox_item("deploy")
    assert (item["status"], item["askId"], item["title"]) == (
        "INBOX_ITEM_STATUS_OPEN",
        ask_id,
        "Deploy?",
    )
    # A newer ask under the same key replaces the open one.
    again = await ln.run(
        "comms_inbox_post", {"key": "deploy", "questions": NATIVE_ASK["questions"]}
    )
    assert (await ln.ada_inbox_item("deploy"))["askId"] == ask_id_of(again) != ask_id

    note = await ln.run("comms_inbox_post", {"key": "backups", "body": "Backups are done."})
    assert note == 'Posted a note under "backups"; it waits on nobody.'
    assert (await ln.ada_inbox_item("backups"))["status"] == "INBOX_ITEM_STATUS_NOTE"
    with pytest.raises(ToolError, match="comms_inbox_post failed: invalid_argument: key must"):
        await ln.run("comms_inbox_post", {"key": " ", "body": "x"})


async def s_inbox_reply(ln: Lane) -> None:
    await ln.run("comms_inbox_post", {"key": "deploy", "questions": NATIVE_ASK["questions"]})
    text = await ln.run("comms_inbox_reply", {"key": "deploy", "text": "Logs look clean."})
    assert text == 'Replied in inbox item "deploy".'
    item = await ln.ada_inbox_item("deploy")
    got = await ln.ada_inbox("GetInboxItem", {"itemId": item["itemId"]})
    assert got["thread"][-1]["message"]["blocks"][0]["text"]["text"] == "Logs look clean."
    with pytest.raises(ToolError, match="comms_inbox_reply failed: not_found: "):
        await ln.run("comms_inbox_reply", {"key": "nope", "text": "x"})


async def s_inbox_close(ln: Lane) -> None:
    await ln.run("comms_inbox_post", {"key": "deploy", "questions": NATIVE_ASK["questions"]})
    closed = 'Closed inbox item "deploy": its ask is withdrawn; no answer will arrive.'
    assert await ln.run("comms_inbox_close", {"key": "deploy", "reason": "moot"}) == closed
    item = await ln.ada_inbox_item("deploy")
    assert (item["status"], item["closeReason"]) == ("INBOX_ITEM_STATUS_CLOSED", "moot")
    assert await ln.run("comms_inbox_close", {"key": "deploy", "reason": "moot"}) == closed

    # A person declined it first: nothing is left to withdraw, and the text says so.
    await ln.run("comms_inbox_post", {"key": "audit", "questions": NATIVE_ASK["questions"]})
    audit = await ln.ada_inbox_item("audit")
    await ln.ada_inbox("DeclineInboxAsk", {"itemId": audit["itemId"], "reason": "not now"})
    assert await ln.run("comms_inbox_close", {"key": "audit", "reason": "moot"}) == (
        f'Inbox item "audit" was already closed by {ln.w.human.account_id} (a person closed it '
        "or declined its ask), so nothing was withdrawn; no answer will arrive."
    )

    # Answered first: the close fails, saying the answer won.
    await ln.run("comms_inbox_post", {"key": "region", "questions": NATIVE_ASK["questions"]})
    region = await ln.ada_inbox_item("region")
    answered = await ln.ada_inbox(
        "AnswerInboxAsk",
        {
            "itemId": region["itemId"],
            "clientKey": "k1",
            "answers": [
                {"questionId": "db", "chosenOptionIds": ["0"]},
                {"questionId": "langs", "customText": "Rust"},
            ],
        },
    )
    assert answered["outcome"] == "INBOX_ANSWER_OUTCOME_TAKEN"
    with pytest.raises(ToolError) as failed:
        await ln.run("comms_inbox_close", {"key": "region", "reason": "moot"})
    assert str(failed.value).startswith("comms_inbox_close failed: already_exists: ")
    assert "answered first" in str(failed.value) and "later turn" in str(failed.value)


async def s_spawn_agent(ln: Lane) -> None:
    text = await ln.run("comms_spawn_agent", {"handle": "planner"})
    found = re.fullmatch(r'Spawned sub-agent @planner id="([^"]+)" under you\.', text)
    assert found, text
    got = await ln.as_ada("GetAccounts", pb.GetAccountsRequest(account_ids=[found.group(1)]))
    [planner] = got.accounts
    assert (planner.handle, planner.parent_account_id) == ("planner", str(ln.w.agent.account_id))
    with pytest.raises(ToolError) as taken:
        await ln.run("comms_spawn_agent", {"handle": "planner"})
    assert str(taken.value).startswith("comms_spawn_agent failed: already_exists: ")
    assert "choose another" in str(taken.value)
    with pytest.raises(ToolError, match="comms_spawn_agent failed: invalid_argument: "):
        await ln.run("comms_spawn_agent", {"handle": "x" * 81})


SCENARIOS: dict[str, Scenario] = {
    "comms_post_message": s_post_message,
    "comms_post_ask": s_post_ask,
    "comms_cancel_ask": s_cancel_ask,
    "comms_get_ask": s_get_ask,
    "comms_list_messages": s_list_messages,
    "comms_list_channels": s_list_channels,
    "comms_get_message": s_get_message,
    "comms_search_messages": s_search_messages,
    "comms_open_dm": s_open_dm,
    "comms_create_channel": s_create_channel,
    "comms_add_channel_member": s_add_channel_member,
    "comms_update_topic": s_update_topic,
    "comms_set_status": s_set_status,
    "comms_inbox_post": s_inbox_post,
    "comms_inbox_reply": s_inbox_reply,
    "comms_inbox_close": s_inbox_close,
    "comms_spawn_agent": s_spawn_agent,
}


def test_every_tool_has_a_real_server_scenario() -> None:
    assert sorted(SCENARIOS) == sorted(spec.name for spec in SPECS)


@pytest.mark.parametrize("name", sorted(SCENARIOS))
async def test_every_tool_works_against_the_real_server(lane: Lane, name: str) -> None:
    await SCENARIOS[name](lane)
    sent = {r.WhichOneof("call") for r in lane.sent.requests}
    assert tool(list(lane.tools.values()), name).arm in sent


async def test_a_server_refusal_is_a_tool_failure_with_its_code(lane: Lane) -> None:
    outsider = await lane.w.add_account("mallory")
    with pytest.raises(CallError):
        await lane.grpc.call(
            "ListMessages",
            pb.ListMessagesRequest(channel_id=lane.channel),
            lane.w.tokens[outsider.account_id],
        )
    dm = await lane.grpc.call(
        "OpenDM",
        pb.OpenDMRequest(account_id=str(lane.w.human.account_id)),
        lane.w.tokens[outsider.account_id],
    )
    with pytest.raises(ToolError) as failed:
        await lane.run(
            "comms_post_message", {"channel_id": dm.channel.channel_id, "text": "let me in"}
        )
    assert re.match(
        r"comms_post_message failed: (not_found|permission_denied): \S", str(failed.value)
    )
