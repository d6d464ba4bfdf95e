"""The MCP tools of compass-mcp, on the official SDK's MCPServer.

Each tool but `ask` is one of the kit's comms tools under an MCP name, with
its description written for a model that reaches Compass only through these
tools (it has no delivery lane to hear answers on). The rules stay the
kit's: the input schema a client sees is the kit tool's own, and the kit's
validator checks every call against it before anything is sent, so a bad
argument is a tool result with isError and the reason, never a protocol
error. No tool answers an ask.

`ask` posts one ask (the kit's post_ask, taking the coding agents'
question-tool shape) and waits for its ending: the answers, or the typed
ending in words (see endings.py). While it waits it reports progress; if
the client stops waiting first, the ask stays open and check_ask reads it.

`spawn_agent` creates a sub-agent under the agent (or under one of its
sub-agents) and binds it here at once; every tool takes `agent`, a
sub-agent's handle, to act as that sub-agent instead (its asks are its own).
"""

from __future__ import annotations

import asyncio
import contextlib
import copy
import logging
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.tools import Tool as SdkTool
from mcp.server.mcpserver.utilities.func_metadata import func_metadata
from mcp_types import CallToolResult, TextContent, ToolAnnotations
from pydantic import Field

from compass.v1 import agent_gateway_pb2 as gw
from compass.v1 import comms_pb2 as pb
from compass.v1 import inbox_pb2
from compass_agentkit import schema
from compass_agentkit.command import version
from compass_agentkit.endings import ask_state, withdrawn_by_me
from compass_agentkit.mcp_server.session import AgentSession
from compass_agentkit.pictures import Sandbox
from compass_agentkit.subagents import SPAWN_TOOL
from compass_agentkit.tools import (
    ASK_MARKERS,
    CODING_AGENT_QUESTIONS,
    MAX_HANDLE_CHARS,
    SPECS,
    Tool,
    ToolError,
    ToolSpec,
    attachments_text,
    with_questions,
)

__all__ = ["ROWS", "Settings", "build_server", "tool_annotations"]

log = logging.getLogger(__name__)

Args = dict[str, Any]

INSTRUCTIONS = (
    "Compass connects you with the people you work for. When you need a person's decision "
    "before going on, call ask: it posts your questions in a Compass channel and returns "
    "their answers. Use check_ask and cancel_ask for an ask whose call stopped waiting, "
    "read_channel to read a conversation, post_message to tell people something, and the "
    "inbox tools to keep the people who oversee you informed. A sub-agent of yours that "
    "needs people asks under its own name: spawn_agent creates it, and any tool called with "
    "agent set to its handle acts as it."
)

AGENT_PARAM: dict[str, Any] = {
    "type": "string",
    "minLength": 1,
    "maxLength": MAX_HANDLE_CHARS,
    "pattern": schema.NOT_BLANK,
    "description": (
        "Act as this sub-agent, by the handle spawn_agent gave it (default: yourself, the "
        "agent this server runs as)"
    ),
}

SPAWN_DESCRIPTION = (
    "Create a sub-agent under you (or, with agent, under one of your sub-agents) and start "
    "its session here. It takes part in every channel you take part in, and posts and asks "
    "there under its own name, which people see as yours › its handle. To act as it, pass "
    "agent set to its handle to any tool, for example ask. The handle must be unused in "
    "the workspace."
)


@dataclass(frozen=True, slots=True)
class Settings:
    # The channel `ask` posts in when the call names none.
    channel_id: str | None = None
    # The longest one `ask` call waits for the ending before it returns with
    # the ask still open; a call may ask for less.
    wait_seconds: int = 3600
    # How often a waiting `ask` reports progress (clients that reset their
    # timeout on progress keep waiting).
    progress_seconds: float = 15.0
    # Where the inbox tools read pictures from; without one they take none.
    sandbox: Sandbox | None = None


@dataclass(frozen=True, slots=True)
class Row:
    """One kit comms tool as an MCP tool."""

    name: str
    kit: str
    description: str
    # Parameter → its description for this client's model.
    parameters: Mapping[str, str] = field(default_factory=dict)
    # Replacements of the kit's error meanings (by code).
    meanings: Mapping[str, str] = field(default_factory=dict)
    text: Callable[[Args, Any], str] | None = None
    structured: Callable[[Args, Any], dict[str, Any]] | None = None
    # Questions in the coding agents' shape, as `ask` takes them.
    questions: bool = False
    # Runs after the call succeeded.
    after: Callable[[AgentSession, Args], None] | None = None


def _cancelled(session: AgentSession, args: Args) -> None:
    # The lane does not carry the agent's own withdrawal back: an `ask`
    # waiting on this id learns of it here.
    session.endings.ended(withdrawn_by_me(args["ask_id"]))


def _inbox_posted(args: Args, res: gw.InboxPostResponse) -> str:
    if res.message.ask_status == inbox_pb2.INBOX_ASK_STATUS_OPEN:
        return (
            f'Posted in inbox item "{" ".join(args["key"].split())}"; its ask '
            f'id="{res.item.ask_id}" is open (it replaces any ask the item held open). The '
            "people who oversee you answer or decline it in your inbox; how it ends is not "
            "shown here. When you need to wait for an answer, use ask."
        ) + attachments_text(res.message)
    return _kit_spec("comms_inbox_post").text(args, res)


ASK_ID = "The ask's id, as ask reported it (in its first progress message and its result)"

ROWS: tuple[Row, ...] = (
    Row(
        name="check_ask",
        kit="comms_get_ask",
        description=(
            "Read one ask by its id: whether it is still open, answered (each question's "
            "chosen options and free text), declined (by whom, and why), expired, withdrawn by "
            "you, or withdrawn by your owner; and whom its follow-ups reminded or escalated "
            "to, and when. Use it for an ask whose ask call stopped waiting, or any ask in "
            "your channels."
        ),
        parameters={"ask_id": ASK_ID},
        structured=lambda args, res: ask_state(res.ask),
    ),
    Row(
        name="cancel_ask",
        kit="comms_cancel_ask",
        description=(
            "Withdraw your own open ask so it takes no answer; people see it as withdrawn, "
            "and an ask call waiting on it returns that it was withdrawn. Withdrawing again "
            "succeeds again. If it fails with already_exists, the ask already ended some other "
            "way (answered, declined, expired, or withdrawn by your owner): check_ask shows "
            "how. To change a question, ask the new one first, then withdraw the old one."
        ),
        parameters={"ask_id": ASK_ID},
        meanings={
            "already_exists": (
                "The ask already ended some other way (answered, declined, expired, or "
                "withdrawn by your owner), so it can't be withdrawn; check_ask shows how"
            )
        },
        after=_cancelled,
    ),
    Row(
        name="post_message",
        kit="comms_post_message",
        description=(
            "Post a text message in a Compass channel you belong to (list_channels shows "
            "them). It asks nothing and waits for nothing; to ask a question, call ask."
        ),
        parameters={"channel_id": "The channel to post in, from list_channels"},
    ),
    Row(
        name="read_channel",
        kit="comms_list_messages",
        description=(
            "Read a Compass channel's recent messages, oldest first, one entry per line as "
            "`@handle (message_id): text`. " + ASK_MARKERS + " Pass the page_token from the "
            "last line to read older messages."
        ),
        parameters={"channel_id": "The channel to read, from list_channels"},
    ),
    Row(
        name="list_channels",
        kit="comms_list_channels",
        description=(
            "List the Compass channels and direct messages you belong to: id, name, member "
            "count and topic."
        ),
    ),
    Row(
        name="set_status",
        kit="comms_set_status",
        description=(
            "Set your status in Compass: idle or working, with a short line saying what you "
            "are doing. While an ask of yours is open people see you as WAITING whatever you "
            "set."
        ),
    ),
    Row(
        name="inbox_post",
        kit="comms_inbox_post",
        description=(
            "Post to your Compass inbox, where the people who oversee you read and answer: one "
            "item per key, each a thread. With questions (the shape ask takes) it asks, "
            "replacing any ask the item held open, and the item waits for one answer (or a "
            "person declines it); this call does not wait for it and its answer is not shown "
            "to you (use ask to wait for an answer). Without questions it only adds to the "
            "thread; under a new key it is a note that waits on nobody. title names the item "
            "(a new item without one is titled by its key). pictures attaches image files "
            "from your sandbox; where body names a picture's path, people read the picture's "
            "address instead."
        ),
        text=_inbox_posted,
        questions=True,
    ),
    Row(
        name="inbox_reply",
        kit="comms_inbox_reply",
        description=(
            "Add a message without an ask to one of your inbox items, by its key: text, "
            "pictures from your sandbox, or both. Where text names a picture's path, people "
            "read the picture's address instead."
        ),
    ),
    Row(
        name="inbox_close",
        kit="comms_inbox_close",
        description=(
            "Withdraw the open ask of one of your inbox items, saying why; the item closes and "
            "takes no answer. Closing again succeeds again, and so does closing an item a "
            "person already closed or whose ask they declined (the result says so). If it "
            "fails with already_exists, the item was answered first or holds only a note. To "
            "change the question, post the new ask under the same key instead: it replaces "
            "the old one."
        ),
        meanings={
            "already_exists": (
                "The item has no open ask to withdraw: it was answered first or it holds only "
                "a note"
            )
        },
    ),
)


def _kit_spec(name: str) -> ToolSpec:
    return next(spec for spec in SPECS if spec.name == name)


def _described(parameters: Mapping[str, Any], descriptions: Mapping[str, str]) -> dict[str, Any]:
    """The kit's schema with some parameters described for this client."""
    shown = copy.deepcopy(dict(parameters))
    for name, description in descriptions.items():
        shown["properties"][name]["description"] = description
    return shown


def _spec(row: Row) -> ToolSpec:
    spec = _kit_spec(row.kit)
    if row.questions:
        spec = with_questions(spec, CODING_AGENT_QUESTIONS)
    return replace(
        spec,
        name=row.name,
        description=row.description,
        parameters=_described(spec.parameters, row.parameters),
        meanings={**spec.meanings, **row.meanings},
        text=row.text or spec.text,
    )


# --- results ----------------------------------------------------------------------------


def _result(text: str, structured: dict[str, Any] | None = None) -> CallToolResult:
    return CallToolResult(
        content=[TextContent(type="text", text=text)], structured_content=structured
    )


def _failed(text: str) -> CallToolResult:
    return CallToolResult(content=[TextContent(type="text", text=text)], is_error=True)


def _crashed(name: str) -> CallToolResult:
    # Never the exception's text: it may carry anything.
    log.exception("%s: unexpected failure", name)
    return _failed(f"{name} failed: internal: compass-mcp failed on this call; its log says why")


Run = Callable[[dict[str, Any], Context[Any, Any]], Awaitable[CallToolResult]]


class _CompassTool(SdkTool):
    """A tool whose input schema is the kit tool's: the call goes straight to
    the kit, whose validator checks it against exactly that schema."""

    call: Run = Field(exclude=True)

    async def run(
        self, arguments: dict[str, Any], context: Any, convert_result: bool = False
    ) -> Any:
        return await self.call(arguments, context)


async def _unused(context: Context[Any, Any]) -> None:
    """The SDK's argument model stands for no parameters: `run` checks them."""


def tool_annotations(spec: ToolSpec) -> ToolAnnotations:
    """The kit tool's label and approval class as MCP's hints, for a harness
    deciding which calls a person approves."""
    read = spec.approval == "read"
    return ToolAnnotations(
        title=spec.label,
        read_only_hint=read,
        destructive_hint=spec.destructive and not read,
        idempotent_hint=read or spec.idempotent,
        open_world_hint=True,
    )


def _sdk_tool(spec: ToolSpec, parameters: Mapping[str, Any], call: Run) -> SdkTool:
    schema.check_schema(parameters)
    return _CompassTool(
        fn=_unused,
        name=spec.name,
        title=spec.label,
        description=spec.description,
        parameters=copy.deepcopy(dict(parameters)),
        fn_metadata=func_metadata(_unused, skip_names=["context"], structured_output=False),
        is_async=True,
        context_kwarg="context",
        annotations=tool_annotations(spec),
        call=call,
    )


def _with_agent(parameters: Mapping[str, Any]) -> dict[str, Any]:
    shown = copy.deepcopy(dict(parameters))
    shown["properties"]["agent"] = copy.deepcopy(AGENT_PARAM)
    return shown


def _acting(name: str, session: AgentSession, arguments: object) -> tuple[AgentSession, Any]:
    """Whom the call acts as (`agent`, or the session's own agent) and the
    arguments without `agent`, which the kit's tool does not take."""
    if not isinstance(arguments, dict) or "agent" not in arguments:
        return session, arguments
    args = dict(arguments)
    handle = args.pop("agent")
    problems = schema.errors(AGENT_PARAM, handle, "agent")
    if problems:
        raise ToolError(name, "invalid_argument", "; ".join(problems))
    sub = session.subagents.get(handle)
    if sub is None:
        raise ToolError(
            name,
            "not_found",
            f"no sub-agent @{' '.join(handle.split())} was spawned through this compass-mcp "
            "since it started; spawn_agent spawns one",
        )
    return sub, args


def _comms_tool(row: Row, session: AgentSession, settings: Settings) -> SdkTool:
    spec = _spec(row)

    async def call(arguments: dict[str, Any], context: Context[Any, Any]) -> CallToolResult:
        try:
            actor, args = _acting(row.name, session, arguments)
            tool = Tool(spec, actor.call, settings.sandbox)
            response = await tool.send(args)
            text = tool.spec.text(args, response)
            structured = row.structured(args, response) if row.structured else None
        except ToolError as exc:
            return _failed(str(exc))
        except Exception:
            return _crashed(row.name)
        if row.after is not None:
            row.after(actor, args)
        return _result(text, structured)

    return _sdk_tool(spec, _with_agent(spec.parameters), call)


def _spawn_tool(session: AgentSession) -> SdkTool:
    spec = next(spec for spec in SPECS if spec.name == SPAWN_TOOL)

    async def call(arguments: dict[str, Any], context: Context[Any, Any]) -> CallToolResult:
        try:
            parent, args = _acting("spawn_agent", session, arguments)
            problems = schema.errors(spec.parameters, args)
            if problems:
                raise ToolError("spawn_agent", "invalid_argument", "; ".join(problems))
            sub = await session.spawn(args["handle"], parent)
        except ToolError as exc:
            return _failed(str(exc).replace(f"{SPAWN_TOOL} failed", "spawn_agent failed", 1))
        except Exception:
            return _crashed("spawn_agent")
        handle = " ".join(sub.handle.split())
        return _result(
            f'Spawned sub-agent @{handle} id="{sub.agent_id}" and started its session here. '
            f'Pass agent="{handle}" to any tool to act as it.',
            {"account_id": sub.agent_id, "handle": sub.handle},
        )

    shown = replace(spec, name="spawn_agent", description=SPAWN_DESCRIPTION)
    return _sdk_tool(shown, _with_agent(spec.parameters), call)


# --- ask --------------------------------------------------------------------------------

ASK_DESCRIPTION = (
    "Ask people a question and wait for their answer. Posts one form of one or more "
    "questions in a Compass channel; one person answers all of them at once, and this call "
    "returns their answers: for each question the chosen option labels and any free text "
    "(people can always type their own answer). Use it when you need a human decision "
    "before going on; while it waits you show as WAITING. It may also end without an "
    "answer, which the result says in words: declined by a person (with their reason), "
    "expired at its deadline, or withdrawn (by you, or by your owner). Give it a deadline "
    "(deadline_seconds, or deadline as an RFC 3339 time) so it expires when the answer would "
    "come too late; name answerer_account_ids so only those people may answer, and quorum "
    "when several of them must each answer (the result then lists every one's answers). A "
    "person may have made a standing answer for asks like this one: then it returns at once "
    "with that answer. If this "
    "call stops before the ask ends (the client's timeout or cancellation, or "
    "wait_seconds), the ask stays open: read it later with check_ask, or withdraw it with "
    "cancel_ask (the ask id is in the first progress message and in the result)."
)


def _ask_spec(settings: Settings) -> ToolSpec:
    spec = with_questions(_kit_spec("comms_post_ask"), CODING_AGENT_QUESTIONS)
    parameters = copy.deepcopy(dict(spec.parameters))
    properties = parameters["properties"]
    properties["channel_id"] = schema.id_param(
        "The channel to ask in, from list_channels"
        + (" (default: this server's channel)" if settings.channel_id else "")
    )
    properties["text"]["description"] = "Optional text shown above the questions"
    properties["wait_seconds"] = {
        "type": "integer",
        "minimum": 1,
        "maximum": settings.wait_seconds,
        "description": (
            f"How long this call waits for the answer before it returns with the ask still "
            f"open, 1-{settings.wait_seconds} (default {settings.wait_seconds}); not the ask's "
            "deadline, which ends the ask itself"
        ),
    }
    parameters["required"] = ["questions"] if settings.channel_id else ["questions", "channel_id"]
    return replace(
        spec,
        name="ask",
        label="Ask people and wait for the answer",
        description=ASK_DESCRIPTION,
        parameters=parameters,
        meanings={
            "unavailable": (
                "The ask may or may not have been posted: read_channel shows whether it was"
            )
        },
    )


async def _progress(context: Context[Any, Any], progress: float, message: str) -> None:
    # A client that went away can't be told; the wait goes on regardless.
    with contextlib.suppress(Exception):
        await context.report_progress(progress, None, message)


def _ask_tool(session: AgentSession, settings: Settings) -> SdkTool:
    spec = _ask_spec(settings)

    async def call(arguments: dict[str, Any], context: Context[Any, Any]) -> CallToolResult:
        try:
            actor, args = _acting("ask", session, arguments)
            args = dict(args)
            if settings.channel_id and "channel_id" not in args:
                args["channel_id"] = settings.channel_id
            posted = await Tool(spec, actor.call).send(args)
        except ToolError as exc:
            return _failed(str(exc))
        except Exception:
            return _crashed("ask")
        for block in posted.message.blocks:
            if block.HasField("ask") and block.ask.ask_id == posted.ask_id:
                # A person's standing answer may have answered it at its post.
                actor.endings.heard(block.ask)
        opened = posted.outcome == pb.POST_OUTCOME_ALREADY_OPEN
        return await _wait(actor, posted.ask_id, args["channel_id"], args, context, opened)

    async def _wait(
        session: AgentSession,
        ask_id: str,
        channel_id: str,
        args: Args,
        context: Context[Any, Any],
        opened: bool,
    ) -> CallToolResult:
        wait = int(args.get("wait_seconds", settings.wait_seconds))
        loop = asyncio.get_running_loop()
        started = loop.time()
        said = (
            f"Ask {ask_id} is already open in channel {channel_id}: you asked the same "
            "before, so nothing new was posted; waiting for a person to answer it."
            if opened
            else f"Posted ask {ask_id} in channel {channel_id}; waiting for a person to answer."
        )
        await _progress(
            context,
            0,
            f"{said} If this call stops first, the ask stays open: check_ask or cancel_ask with "
            f"ask_id {ask_id}.",
        )
        ended = asyncio.ensure_future(session.endings.wait(ask_id))
        failed = asyncio.ensure_future(session.wait_failed())
        try:
            while True:
                left = started + wait - loop.time()
                if left <= 0:
                    return _result(
                        f"Ask {ask_id} is still open: nobody answered within {wait}s. Call "
                        f"check_ask with ask_id {ask_id} to read its answer later, or "
                        "cancel_ask to withdraw it.",
                        {"ask_id": ask_id, "state": "open"},
                    )
                await asyncio.wait(
                    [ended, failed],
                    timeout=min(left, settings.progress_seconds),
                    return_when=asyncio.FIRST_COMPLETED,
                )
                if ended.done():
                    ending = ended.result()
                    return _result(ending.text, ask_state(ending.ask))
                if failed.done():
                    error = failed.result()
                    return _failed(
                        f"ask failed: {error.code}: {error.message}. Ask {ask_id} stays open: "
                        "check_ask reads it once compass-mcp reaches Compass again."
                    )
                elapsed = loop.time() - started
                await _progress(
                    context,
                    elapsed,
                    f"Still waiting for a person to answer ask {ask_id} ({elapsed:.0f}s).",
                )
        except asyncio.CancelledError:
            log.info("ask %s: the client stopped waiting; the ask stays open", ask_id)
            raise
        finally:
            ended.cancel()
            failed.cancel()

    return _sdk_tool(spec, _with_agent(spec.parameters), call)


def build_server(session: AgentSession, settings: Settings) -> MCPServer[Any]:
    """The MCP server: `ask` and one tool per row, all as this session's agent."""
    tools = [
        _ask_tool(session, settings),
        *(_comms_tool(row, session, settings) for row in ROWS),
        _spawn_tool(session),
    ]
    return MCPServer(
        "compass",
        version=version("compass-agentkit"),
        instructions=INSTRUCTIONS,
        tools=tools,
    )
