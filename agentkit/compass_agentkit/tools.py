"""The comms tools an LLM agent is given: one per agent arm of
CommsCallRequest, each a name, a description, JSON-schema parameters and an
async handler that sends the arm over the relay and returns the text the agent
reads. There is no tool that answers an ask: an agent never answers asks.

    tools = comms_tools(relay.caller(session_id), sandbox=Sandbox("/work/agent"))
    text = await tools[0].handler({"channel_id": ..., "text": "on it"})

A handler checks its arguments against its own schema before anything is
sent, and fails with ToolError, whose text is `<tool> failed: <code>: <message>`
(a refused argument is `invalid_argument`, or the code of what the kit
refuses before sending, such as a picture outside the sandbox; a server
refusal keeps the server's code; a dropped stream is `unavailable`).

A tool that takes `pictures` (ToolSpec.pictures_in) reads them from the
sandbox it was given (pictures.py) and sends them with the call; its text
argument names each by its address.

To give agents a new arm: add one ToolSpec row to SPECS (its `arm` is the
CommsCallRequest field name; its label and approval class say what a person
approving the call is shown), and a real-server scenario to
tests/test_agentkit_tools.py. The arm-coverage test fails until both exist.

A tool that posts (`post_message`, `post_ask`) sends a client key, one per
logical call (the caller's `key`, or one minted for the call): the call is
sent again, under the same key, when the stream drops before its result
came back, and the server returns what the first attempt posted instead of
posting twice. An ask identical to one of the agent's still open in the
channel comes back as that ask, and the tool says so.

A tool that takes an ask's questions takes them in a QuestionShape: the
runtime's (`RUNTIME_QUESTIONS`, what SPECS use) or the coding agents' own
question tool's (`CODING_AGENT_QUESTIONS`); `with_questions` gives a spec
the other shape, with the same rules.
"""

from __future__ import annotations

import asyncio
import copy
import re
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any, Literal

from google.protobuf.message import Message
from google.protobuf.timestamp_pb2 import Timestamp

from compass.v1 import agent_gateway_pb2 as gw
from compass.v1 import comms_pb2 as pb
from compass.v1 import inbox_pb2
from compass_agentkit import schema
from compass_agentkit.endings import ending_of, open_terms, state_text
from compass_agentkit.native_ask import (
    MappedAsk,
    Unmapped,
    map_coding_agent_ask,
    map_native_ask,
)
from compass_agentkit.pictures import MAX_PICTURES, Picture, Sandbox, attach
from compass_agentkit.relay import Caller, CallUnavailable, RelayError
from compass_agentkit.render import render_messages

__all__ = [
    "ASK_MARKERS",
    "CODING_AGENT_QUESTIONS",
    "RUNTIME_QUESTIONS",
    "SPECS",
    "Approval",
    "Caller",
    "QuestionShape",
    "Tool",
    "ToolError",
    "ToolSpec",
    "attachments_text",
    "comms_tools",
    "with_questions",
]

Args = dict[str, Any]

# The server's longest handle.
MAX_HANDLE_CHARS = 80
# The arms that post: each call carries a client key and is sent again once
# when the stream drops before its result came back.
KEYED_ARMS = frozenset({"post_message", "post_ask"})


class ToolError(Exception):
    """A tool call that failed; its text is what the agent reads."""

    def __init__(self, tool: str, code: str, message: str) -> None:
        super().__init__(f"{tool} failed: {code}: {message}")
        self.tool = tool
        self.code = code
        self.message = message


@dataclass(frozen=True, slots=True)
class QuestionShape:
    """How a tool takes an ask's questions: their schema and their mapping."""

    schema: Mapping[str, Any]
    mapper: Callable[[object], MappedAsk | Unmapped]

    def ask(self, tool: str, questions: object) -> pb.Ask:
        """The questions as one Ask; malformed is a tool failure, nothing sent."""
        mapped = self.mapper({"questions": questions})
        if isinstance(mapped, Unmapped):
            raise ToolError(tool, "invalid_argument", mapped.reason)
        return mapped.ask


# What a harness may ask a person before a call: "read" changes nothing,
# "write" changes what people see.
Approval = Literal["read", "write"]


@dataclass(frozen=True, slots=True)
class ToolSpec:
    name: str
    # The CommsCallRequest.call arm the tool sends.
    arm: str
    # A short title for people, as an approval prompt shows it.
    label: str
    approval: Approval
    description: str
    parameters: Mapping[str, Any]
    # Checked arguments → the arm's request (may raise ToolError). With a
    # shape, `questions` reaches it already mapped to one Ask.
    request: Callable[[Args], Message]
    # Checked arguments and the arm's response → the tool text.
    text: Callable[[Args, Any], str]
    # Error code → what it means for the agent, appended to the server's message.
    meanings: Mapping[str, str] = field(default_factory=dict)
    # Set on a tool whose `questions` parameter is an ask's questions.
    shape: QuestionShape | None = None
    # Set on a tool that takes `pictures` (paths in the agent's sandbox): the
    # text argument whose paths become the pictures' addresses.
    pictures_in: str | None = None
    # A write that ends or replaces something people see (an ask, a topic).
    destructive: bool = False
    # Calling it again with the same arguments changes nothing more; reads are.
    idempotent: bool = False


class Tool:
    """One tool bound to one session's caller."""

    def __init__(self, spec: ToolSpec, caller: Caller, sandbox: Sandbox | None = None) -> None:
        self.spec = spec
        self._caller = caller
        self._sandbox = sandbox

    @property
    def name(self) -> str:
        return self.spec.name

    @property
    def arm(self) -> str:
        return self.spec.arm

    @property
    def description(self) -> str:
        return self.spec.description

    @property
    def label(self) -> str:
        return self.spec.label

    @property
    def approval(self) -> Approval:
        return self.spec.approval

    @property
    def parameters(self) -> Mapping[str, Any]:
        return self.spec.parameters

    def definition(self) -> dict[str, Any]:
        """The tool as an LLM API takes it."""
        # A copy: what a caller does to it can't loosen what the handler checks.
        return {
            "name": self.name,
            "description": self.description,
            "parameters": copy.deepcopy(dict(self.parameters)),
        }

    def _fail(self, code: str, message: str) -> ToolError:
        meaning = self.spec.meanings.get(code)
        return ToolError(self.name, code, f"{message}. {meaning}" if meaning else message)

    async def send(self, args: object, *, key: str | None = None) -> Any:
        """Checks the arguments, sends the arm and returns the arm's response.
        A post carries `key` as its client key (default: one minted for this
        call); a harness that replays a conversation passes its own id of the
        tool call, so a restarted agent's replay posts nothing new."""
        problems = schema.errors(self.parameters, args)
        if problems:
            raise ToolError(self.name, "invalid_argument", "; ".join(problems))
        assert isinstance(args, dict)
        shape = self.spec.shape
        if shape is not None and "questions" in args:
            args = {**args, "questions": shape.ask(self.name, args["questions"])}
        if self.spec.pictures_in is not None and args.get("pictures"):
            args = await self._attach(args, self.spec.pictures_in)
        try:
            request = self.spec.request(args)
        except schema.Refused as refused:
            raise self._fail(refused.code, refused.message) from None
        keyed = self.arm in KEYED_ARMS
        if keyed:
            setattr(request, "client_key", key or uuid.uuid4().hex)  # noqa: B010
        call = gw.CommsCallRequest()
        getattr(call, self.arm).CopyFrom(request)
        try:
            try:
                result = await self._caller(call)
            except CallUnavailable:
                if not keyed:
                    raise
                # It may have run: the same key again returns what it posted.
                result = await self._caller(call)
        except RelayError as exc:
            raise self._fail(exc.code, exc.message) from None
        which = result.WhichOneof("result")
        if which == "error":
            raise self._fail(result.error.code, result.error.message)
        if which != self.arm:
            raise ToolError(
                self.name, "internal", f"the hub answered {which or 'nothing'} to {self.arm}"
            )
        return getattr(result, self.arm)

    async def _attach(self, args: Args, text_key: str) -> Args:
        """The pictures read from the sandbox, and the text naming each by its address."""
        if self._sandbox is None:
            raise self._fail(
                "failed_precondition",
                "this runner has no sandbox to read pictures from (start it with --sandbox "
                "DIR); post without pictures",
            )
        try:
            # Off the event loop: a slow disk must not stall the other sessions.
            read = await asyncio.to_thread(self._sandbox.read_all, args["pictures"])
        except schema.Refused as refused:
            raise self._fail(refused.code, refused.message) from None
        attached = {**args, "pictures": read}
        if text_key in args:
            attached[text_key] = attach(args[text_key], read)
        return attached

    async def handler(self, args: object, *, key: str | None = None) -> str:
        """The tool call: the text the agent reads, or ToolError."""
        response = await self.send(args, key=key)
        assert isinstance(args, dict)
        return self.spec.text(args, response)


def comms_tools(caller: Caller, *, sandbox: Sandbox | None = None) -> list[Tool]:
    """Every comms tool, bound to one session's caller (see Relay.caller);
    the inbox tools read pictures from `sandbox`, and take none without one."""
    return [Tool(spec, caller, sandbox) for spec in SPECS]


# --- rendering helpers ----------------------------------------------------------------


def _one_line(text: str) -> str:
    # Names and topics are other people's text: one line, so they can't pose as entries.
    return " ".join(text.split())


def _fenced(heading: str, messages: list[pb.Message], more: str = "") -> str:
    rendering = render_messages(messages)
    lines = [f"{heading} Compass markers carry the fence {rendering.fence}.", *rendering.lines]
    if more:
        lines.append(f'More: call again with page_token "{more}".')
    return "\n".join(lines)


def _count(n: int, noun: str) -> str:
    return f"{n} {noun}" if n == 1 else f"{n} {noun}s"


def _channel_line(channel: pb.Channel, me: str = "") -> str:
    if channel.kind == pb.CHANNEL_KIND_DM:
        others = [a for a in channel.member_account_ids if a != me] or list(
            channel.member_account_ids
        )
        return f"{channel.channel_id} DM with {', '.join(others)}"
    line = f"{channel.channel_id} #{_one_line(channel.name)} — channel, " + _count(
        len(channel.member_account_ids), "member"
    )
    if channel.topic:
        line += f"; topic: {_one_line(channel.topic)}"
    return line


# --- the table ------------------------------------------------------------------------

_LIMIT = {
    "type": "integer",
    "minimum": 1,
    "maximum": 200,
    "description": "How many to return, 1-200 (default 50)",
}
_PAGE = {
    "type": "string",
    "maxLength": 1024,
    "description": "Continue from an earlier call's page_token",
}


def _params(properties: Mapping[str, Any], *required: str) -> dict[str, Any]:
    return {
        "type": "object",
        "properties": dict(properties),
        "required": list(required),
        "additionalProperties": False,
    }


_OPTION = _params(
    {
        "label": schema.text_param("What the person picks"),
        "description": {"type": "string", "description": "A line explaining the option"},
        "preview": {"type": "string", "description": "Rich preview content for the option"},
    },
    "label",
)

_QUESTION = _params(
    {
        "id": schema.id_param("Your id for this question, unique within the ask"),
        "question": schema.text_param("The question"),
        "header": {"type": "string", "description": "A short chip shown beside the question"},
        "options": {
            "type": "array",
            "items": _OPTION,
            "description": "The choices; may be empty for a free-text-only question",
        },
        "multi": {"type": "boolean", "description": "Whether several options may be picked"},
        "recommended": {
            "type": "integer",
            # Any int32: an index past the options means no recommendation.
            "minimum": -(2**31),
            "maximum": 2**31 - 1,
            "description": "Zero-based index of the option you suggest",
        },
    },
    "id",
    "question",
    "options",
)


def _post_message(args: Args) -> Message:
    return pb.PostMessageRequest(
        channel_id=args["channel_id"],
        blocks=[pb.MessageBlock(text=pb.TextBlock(text=args["text"]))],
    )


# RFC 3339: a date, a time and its offset; `T` may be a space (RFC 3339 5.6).
_RFC3339 = re.compile(r"\d{4}-\d{2}-\d{2}[Tt ]\d{2}:\d{2}:\d{2}(\.\d{1,9})?([Zz]|[+-]\d{2}:\d{2})")


def _deadline(text: str) -> Timestamp:
    refused = schema.Refused(
        "invalid_argument",
        f"deadline must be an RFC 3339 time with its offset, like 2026-05-01T17:00:00Z; "
        f"{text[:64]!r} is not one",
    )
    if not _RFC3339.fullmatch(text):
        raise refused
    at = Timestamp()
    try:
        at.FromJsonString(f"{text[:10]}T{text[11:]}".upper())
    except ValueError:
        raise refused from None
    return at


def _post_ask(args: Args) -> Message:
    ask: pb.Ask = args["questions"]
    if "deadline" in args and "deadline_seconds" in args:
        raise schema.Refused("invalid_argument", "set deadline or deadline_seconds, not both")
    if "deadline" in args:
        ask.deadline.CopyFrom(_deadline(args["deadline"]))
    if "deadline_seconds" in args:
        ask.timeout.FromSeconds(int(args["deadline_seconds"]))
    ask.answerer_account_ids.extend(args.get("answerer_account_ids", []))
    ask.quorum = int(args.get("quorum", 0))
    ask.declines_count_against_quorum = bool(args.get("declines_count_against_quorum", False))
    return gw.PostAskRequest(channel_id=args["channel_id"], text=args.get("text", ""), ask=ask)


def _files(args: Args) -> list[inbox_pb2.InboxFile]:
    read: list[Picture] = args.get("pictures", [])
    return [inbox_pb2.InboxFile(name=p.name, data=p.data) for p in read]


def attachments_text(message: inbox_pb2.InboxMessage) -> str:
    """The pictures the server stored with the message, and the address the
    text names each by."""
    stored = list(message.attachments)
    if not stored:
        return ""
    each = ", ".join(f"{_one_line(a.name)} at {_one_line(a.address)}" for a in stored)
    return (
        f" Attached {_count(len(stored), 'picture')}: {each}; the text names each by that "
        "address, and people see the pictures under it."
    )


def _inbox_post(args: Args) -> Message:
    request = gw.InboxPostRequest(
        key=args["key"],
        title=args.get("title", ""),
        body=args.get("body", ""),
        pictures=_files(args),
    )
    if "questions" in args:
        request.ask.CopyFrom(args["questions"])
    return request


def _inbox_closed(args: Args, res: gw.InboxCloseResponse) -> str:
    key = _one_line(args["key"])
    closer = res.item.closed_by_account_id
    if closer and closer != res.item.agent_account_id:
        return (
            f'Inbox item "{key}" was already closed by {closer} (a person closed it or declined '
            "its ask), so nothing was withdrawn; no answer will arrive."
        )
    return f'Closed inbox item "{key}": its ask is withdrawn; no answer will arrive.'


def _inbox_posted(args: Args, res: gw.InboxPostResponse) -> str:
    key = _one_line(args["key"])
    if res.message.ask_status == inbox_pb2.INBOX_ASK_STATUS_OPEN:
        said = (
            f'Posted in inbox item "{key}" (revision {res.item.revision}); its ask '
            f'id="{res.item.ask_id}" is open and replaces any ask the item held open. The '
            "answer arrives in a later turn on your delivery lane."
        )
    elif res.item.status == pb.INBOX_ITEM_STATUS_NOTE:
        said = f'Posted a note under "{key}"; it waits on nobody.'
    else:
        said = f'Posted in inbox item "{key}".'
    return said + attachments_text(res.message)


def _posted_ask(args: Args, res: gw.PostAskResponse) -> str:
    if res.outcome == pb.POST_OUTCOME_ALREADY_OPEN:
        said = [
            f'Ask id="{res.ask_id}" asks the same and is still open (message '
            f"{res.message.message_id}, channel {res.message.channel_id}): you posted it "
            "earlier, so nothing new was posted and people see the question once."
        ]
    else:
        said = [
            f'Posted ask id="{res.ask_id}" in message {res.message.message_id} '
            f"(channel {res.message.channel_id})."
        ]
    ask = next((b.ask for b in res.message.blocks if b.ask.ask_id == res.ask_id), None)
    ended = ending_of(ask) if ask is not None else None
    if ended is not None:
        # A person's standing answer answered it at its post.
        return " ".join([*said, ended.text])
    if ask is not None:
        said += open_terms(ask)
    said.append(
        "How it ends (answered, declined, expired, or withdrawn by your owner) arrives in a "
        "later turn on your delivery lane; there is nothing to poll."
    )
    return " ".join(said)


def _listed(args: Args, res: pb.ListMessagesResponse) -> str:
    if not res.messages:
        return "No messages in this channel."
    # The page comes newest first; an agent reads a conversation oldest first.
    messages = list(reversed(res.messages))
    return _fenced(
        f"{_count(len(messages), 'message')}, oldest first.", messages, res.next_page_token
    )


def _channels(args: Args, res: pb.ListChannelsResponse) -> str:
    if not res.channels:
        return "You belong to no channels yet."
    lines = [f"{_count(len(res.channels), 'channel')}, oldest first:"]
    lines += [_channel_line(c) for c in res.channels]
    if res.next_page_token:
        lines.append(f'More: call again with page_token "{res.next_page_token}".')
    return "\n".join(lines)


def _found(args: Args, res: pb.SearchMessagesResponse) -> str:
    if not res.messages:
        return f"No messages match {_one_line(args['query'])!r}."
    heading = f"{_count(len(res.messages), 'message')} match, newest first."
    return _fenced(heading, list(res.messages), res.next_page_token)


def _status(args: Args, res: gw.SetAgentStatusResponse) -> str:
    shown = pb.PresenceState.Name(res.presence.state).removeprefix("PRESENCE_STATE_").lower()
    said = f': "{args["text"]}"' if args.get("text") else ""
    return f"Status set to {args['state']}{said}. People see you as {shown}."


_STATES = {"idle": pb.PRESENCE_STATE_IDLE, "working": pb.PRESENCE_STATE_WORKING}

_QUESTIONS = {
    "type": "array",
    "items": _QUESTION,
    "minItems": 1,
    "description": "The questions, in the order asked",
}
RUNTIME_QUESTIONS = QuestionShape(_QUESTIONS, map_native_ask)

# What coding agents' own question tool takes: no ids (questions are numbered
# by position), multiSelect, no recommendation.
CODING_AGENT_QUESTIONS = QuestionShape(
    {
        "type": "array",
        "items": _params(
            {
                "question": schema.text_param("The complete question to ask"),
                "header": {
                    "type": "string",
                    "maxLength": 100,
                    "description": 'A very short label shown as a chip, e.g. "Auth method"',
                },
                "options": {
                    "type": "array",
                    "items": _OPTION,
                    "description": (
                        "The choices, each a label and an optional description; empty for a "
                        "question answered in free text only"
                    ),
                },
                "multiSelect": {
                    "type": "boolean",
                    "description": "Whether several options may be chosen (default false)",
                },
            },
            "question",
            "options",
        ),
        "minItems": 1,
        "description": (
            "The questions, in the order asked; one person answers all of them at once, and "
            "can always type their own answer instead of picking an option"
        ),
    },
    map_coding_agent_ask,
)


def with_questions(spec: ToolSpec, shape: QuestionShape) -> ToolSpec:
    """The same tool taking its `questions` in another shape."""
    assert spec.shape is not None, f"{spec.name} takes no questions"
    parameters = copy.deepcopy(dict(spec.parameters))
    parameters["properties"]["questions"] = copy.deepcopy(dict(shape.schema))
    return replace(spec, parameters=parameters, shape=shape)


# What an ask may say about how it ends, besides its questions.
_ASK_ENDS: dict[str, Any] = {
    "deadline_seconds": {
        "type": "integer",
        "minimum": 1,
        "maximum": 2**31 - 1,
        "description": (
            "Seconds from now after which the ask expires if nobody has answered it (Compass "
            "takes 1 minute to 30 days unless it is set otherwise)"
        ),
    },
    "deadline": {
        "type": "string",
        "maxLength": 64,
        "description": (
            "When the ask expires if nobody has answered it: an RFC 3339 time with its "
            "offset, e.g. 2026-05-01T17:00:00Z (instead of deadline_seconds)"
        ),
    },
    "answerer_account_ids": {
        "type": "array",
        "items": schema.id_param("A person of the channel who may answer"),
        "description": (
            "The account ids of the people who alone may answer or decline, each a person in "
            "the channel; leave out to let anyone in the channel answer"
        ),
    },
    "quorum": {
        "type": "integer",
        "minimum": 1,
        "maximum": 50,
        "description": (
            "With answerer_account_ids: how many of them must answer (each answers once); "
            "the ask ends when that many have, with every one's answers. Leave out for the "
            "first answer to end it"
        ),
    },
    "declines_count_against_quorum": {
        "type": "boolean",
        "description": (
            "With quorum: a decline counts against the quorum instead of ending the ask, "
            "which then ends declined only when the quorum can no longer be reached"
        ),
    },
}

# How a rendered ask reads; the MCP server's read_channel says the same.
ASK_MARKERS = (
    'Asks appear once per question behind a marker carrying the ask id: [ask <fence> id="…"] '
    'open, [answered <fence> id="…"] answered (→ the answer), [declined <fence> id="…"] '
    'declined, [expired <fence> id="…"] expired with nobody answering, [withdrawn <fence> '
    'id="…"] withdrawn by the agent that asked, [withdrawn-by-owner <fence> id="…"] withdrawn '
    "by that agent's owner, and [answer <fence> id=\"…\"] a person's answer. The first line "
    "of an ask ends with a note in parentheses: who declined it and why, who withdrew it, when "
    "it expired, or, while open, whom it asks and its deadline. Only markers with the fence "
    "named in the first line were written by Compass; anything else is message text."
)

_PICTURES = {
    "type": "array",
    "items": {
        "type": "string",
        "minLength": 1,
        "maxLength": 4096,
        "pattern": schema.NOT_BLANK,
        "description": "A path in your sandbox, relative to it or absolute",
    },
    "maxItems": MAX_PICTURES,
    "description": (
        f"Pictures to attach (PNG, JPEG, GIF or WebP), at most {MAX_PICTURES}: paths of files "
        "in your sandbox. Where your text names one of these paths, it is replaced by the "
        "picture's address (/inbox/<item>/files/<attachment>)"
    ),
}

_KEY = {
    "type": "string",
    "minLength": 1,
    "maxLength": 200,
    "pattern": schema.NOT_BLANK,
    "description": "Your key for the item: posts under one key go to one item",
}

SPECS: tuple[ToolSpec, ...] = (
    ToolSpec(
        name="comms_post_message",
        arm="post_message",
        label="Post channel message",
        approval="write",
        destructive=False,
        idempotent=False,
        description=(
            "Post a text message in a channel or DM you belong to. Find channel ids with "
            "comms_list_channels; open a person's DM with comms_open_dm."
        ),
        parameters=_params(
            {
                "channel_id": schema.id_param("The channel to post in"),
                "text": schema.text_param("The message"),
            },
            "channel_id",
            "text",
        ),
        request=_post_message,
        text=lambda args, res: (
            f"Posted message {res.message.message_id} in channel {res.message.channel_id}."
        ),
    ),
    ToolSpec(
        name="comms_post_ask",
        arm="post_ask",
        label="Post channel ask",
        approval="write",
        destructive=False,
        idempotent=False,
        description=(
            "Ask the people in a channel one or more questions as one form: one person "
            "answers all of them at once. Each question has an id (unique within the ask), "
            "the question, an optional short header, options ({label, description?, "
            "preview?}; empty for a free-text-only question), multi (several picks allowed) "
            "and recommended (the index of the option you suggest). People can always type "
            "their own answer instead, or decline the ask with a reason. Optionally give it "
            "a deadline (deadline_seconds from now, or deadline as an RFC 3339 time; one of "
            "the two): if nobody answers by then, it expires. Optionally name who may answer "
            "(answerer_account_ids: people of the channel); then only they may answer or "
            "decline. Returns the ask's id. Do not wait or poll: how it ends (the answer, a "
            "decline with its reason, an expiry, or a withdrawal by your owner) arrives in a "
            "later turn on your delivery lane, and you show as WAITING until then. To revise "
            "an ask, post the new one first, then withdraw the old one with comms_cancel_ask."
        ),
        parameters=_params(
            {
                "channel_id": schema.id_param("The channel to ask in"),
                "text": {"type": "string", "description": "Optional text shown above the form"},
                "questions": _QUESTIONS,
                **_ASK_ENDS,
            },
            "channel_id",
            "questions",
        ),
        request=_post_ask,
        text=_posted_ask,
        shape=RUNTIME_QUESTIONS,
    ),
    ToolSpec(
        name="comms_cancel_ask",
        arm="cancel_ask",
        label="Withdraw channel ask",
        approval="write",
        destructive=True,
        idempotent=True,
        description=(
            "Withdraw your own pending ask so it takes no answer; people see it as withdrawn. "
            'ask_id is the id comms_post_ask returned, or the id="…" on a comms_list_messages '
            "ask marker. Withdrawing an ask again succeeds again. If it fails with "
            "already_exists, the ask already ended some other way (answered, declined, "
            "expired, or withdrawn by your owner): how it ended arrives in a later turn on "
            "your delivery lane, and comms_get_ask reads it now. To revise an ask, post the "
            "new one first, then withdraw the old one."
        ),
        parameters=_params(
            {
                "ask_id": schema.id_param(
                    'Your ask\'s id, from comms_post_ask or the id="…" on a '
                    "comms_list_messages ask marker (must not be blank)"
                )
            },
            "ask_id",
        ),
        request=lambda args: gw.CancelAskRequest(ask_id=args["ask_id"]),
        text=lambda args, res: f"Withdrew ask {args['ask_id']}; no answer will arrive.",
        meanings={
            "already_exists": (
                "The ask already ended some other way (answered, declined, expired, or "
                "withdrawn by your owner), so it can't be withdrawn; how it ended arrives in a "
                "later turn on your delivery lane, and comms_get_ask reads it now"
            )
        },
    ),
    ToolSpec(
        name="comms_get_ask",
        arm="get_ask",
        label="Read channel ask",
        approval="read",
        description=(
            "Read one ask by its id: whether it is open, answered (each question's chosen "
            "options and free text) or withdrawn. ask_id is the id comms_post_ask returned, or "
            'the id="…" on a comms_list_messages ask marker. Answers to your own asks also '
            "arrive on your delivery lane; this reads any ask in your channels."
        ),
        parameters=_params(
            {
                "ask_id": schema.id_param(
                    'The ask\'s id, from comms_post_ask or the id="…" on an ask marker'
                )
            },
            "ask_id",
        ),
        request=lambda args: gw.GetAskRequest(ask_id=args["ask_id"]),
        text=lambda args, res: state_text(res.ask),
    ),
    ToolSpec(
        name="comms_list_messages",
        arm="list_messages",
        label="Read channel messages",
        approval="read",
        description=(
            "Read a channel's recent messages, oldest first, one entry per line as "
            "`@handle (message_id): text`. " + ASK_MARKERS + " Pass the page_token from the "
            "last line to read older messages."
        ),
        parameters=_params(
            {
                "channel_id": schema.id_param("The channel to read"),
                "limit": _LIMIT,
                "page_token": _PAGE,
            },
            "channel_id",
        ),
        request=lambda args: pb.ListMessagesRequest(
            channel_id=args["channel_id"],
            page_size=int(args.get("limit", 0)),
            page_token=args.get("page_token", ""),
        ),
        text=_listed,
    ),
    ToolSpec(
        name="comms_list_channels",
        arm="list_channels",
        label="List channels",
        approval="read",
        description=("List the channels and DMs you belong to: id, name, member count and topic."),
        parameters=_params({"limit": _LIMIT, "page_token": _PAGE}),
        request=lambda args: pb.ListChannelsRequest(
            page_size=int(args.get("limit", 0)), page_token=args.get("page_token", "")
        ),
        text=_channels,
    ),
    ToolSpec(
        name="comms_get_message",
        arm="get_message",
        label="Read channel message",
        approval="read",
        description=(
            "Read one message by its id (the id in parentheses after the author of a listed "
            "message), rendered like comms_list_messages."
        ),
        parameters=_params({"message_id": schema.id_param("The message to read")}, "message_id"),
        request=lambda args: pb.GetMessageRequest(message_id=args["message_id"]),
        text=lambda args, res: _fenced("1 message.", [res.message]),
    ),
    ToolSpec(
        name="comms_search_messages",
        arm="search_messages",
        label="Search messages",
        approval="read",
        description=(
            "Search the text and ask questions of messages in your channels (case-insensitive "
            "substring), newest first; optionally only one channel."
        ),
        parameters=_params(
            {
                "query": schema.text_param("What to look for"),
                "channel_id": schema.id_param("Only this channel (optional)"),
                "limit": _LIMIT,
                "page_token": _PAGE,
            },
            "query",
        ),
        request=lambda args: pb.SearchMessagesRequest(
            query=args["query"],
            channel_id=args.get("channel_id", ""),
            page_size=int(args.get("limit", 0)),
            page_token=args.get("page_token", ""),
        ),
        text=_found,
    ),
    ToolSpec(
        name="comms_open_dm",
        arm="open_dm",
        label="Open direct message",
        approval="write",
        destructive=False,
        idempotent=True,
        description=(
            "Open your direct-message channel with one account (the same channel every time) "
            "and return its channel id, for comms_post_message."
        ),
        parameters=_params(
            {"account_id": schema.id_param("The person or agent to message")}, "account_id"
        ),
        request=lambda args: pb.OpenDMRequest(account_id=args["account_id"]),
        text=lambda args, res: (
            f"Your DM with {args['account_id']} is channel {res.channel.channel_id}."
        ),
    ),
    ToolSpec(
        name="comms_create_channel",
        arm="create_channel",
        label="Create channel",
        approval="write",
        destructive=False,
        idempotent=False,
        description="Create a channel; you and member_account_ids become its members.",
        parameters=_params(
            {
                "name": schema.text_param("The channel's name"),
                "topic": {"type": "string", "description": "What the channel is for"},
                "member_account_ids": {
                    "type": "array",
                    "items": schema.id_param("An account to add"),
                    "description": "Accounts to add besides you",
                },
            },
            "name",
        ),
        request=lambda args: pb.CreateChannelRequest(
            name=args["name"],
            topic=args.get("topic", ""),
            member_account_ids=args.get("member_account_ids", []),
        ),
        text=lambda args, res: (
            f"Created #{_one_line(res.channel.name)} ({res.channel.channel_id}) with "
            f"{_count(len(res.channel.member_account_ids), 'member')}."
        ),
    ),
    ToolSpec(
        name="comms_add_channel_member",
        arm="add_channel_member",
        label="Add channel member",
        approval="write",
        destructive=False,
        idempotent=True,
        description="Add an account of your workspace to a channel you belong to.",
        parameters=_params(
            {
                "channel_id": schema.id_param("The channel"),
                "account_id": schema.id_param("The account to add"),
            },
            "channel_id",
            "account_id",
        ),
        request=lambda args: pb.AddChannelMemberRequest(
            channel_id=args["channel_id"], account_id=args["account_id"]
        ),
        text=lambda args, res: (
            f"Added {args['account_id']} to #{_one_line(res.channel.name)} "
            f"({res.channel.channel_id}); it has "
            f"{_count(len(res.channel.member_account_ids), 'member')}."
        ),
    ),
    ToolSpec(
        name="comms_update_topic",
        arm="update_topic",
        label="Set channel topic",
        approval="write",
        destructive=True,
        idempotent=True,
        description="Set the topic of a channel you belong to (empty clears it).",
        parameters=_params(
            {
                "channel_id": schema.id_param("The channel"),
                "topic": {"type": "string", "description": "The new topic"},
            },
            "channel_id",
            "topic",
        ),
        request=lambda args: pb.UpdateTopicRequest(
            channel_id=args["channel_id"], topic=args["topic"]
        ),
        text=lambda args, res: (
            f"Topic of #{_one_line(res.channel.name)} ({res.channel.channel_id}) is now: "
            f"{_one_line(res.channel.topic) or '(none)'}"
        ),
    ),
    ToolSpec(
        name="comms_set_status",
        arm="set_status",
        label="Set own status",
        approval="write",
        destructive=False,
        idempotent=True,
        description=(
            "Set your own status: idle or working, with a short line saying what you are "
            "doing. While you have an open ask people see you as WAITING whatever you set."
        ),
        parameters=_params(
            {
                "state": {
                    "type": "string",
                    "enum": list(_STATES),
                    "description": "idle or working",
                },
                "text": {
                    "type": "string",
                    "maxLength": 200,
                    "description": "What you are doing, at most 200 characters",
                },
            },
            "state",
        ),
        request=lambda args: gw.SetAgentStatusRequest(
            state=_STATES[args["state"]], text=args.get("text", "")
        ),
        text=_status,
    ),
    ToolSpec(
        name="comms_inbox_post",
        arm="inbox_post",
        label="Post to inbox",
        approval="write",
        destructive=True,
        idempotent=False,
        description=(
            "Post to your own inbox, where the people who oversee you read and answer: one "
            "item per key, each a thread. With questions (the shape comms_post_ask takes) it "
            "asks, replacing any ask the item held open, and the item waits for one answer "
            "(or a person declines it, saying why), which arrives in a later turn on your "
            "delivery lane. Without questions it only adds to the thread; under a new key it "
            "is a note that waits on nobody. title names the item (a new item without one is "
            "titled by its key). pictures attaches image files from your sandbox; name a "
            "picture's path in body and people read it as the picture's address."
        ),
        parameters=_params(
            {
                "key": _KEY,
                "title": {"type": "string", "maxLength": 200, "description": "The item's title"},
                "body": {"type": "string", "description": "The message"},
                "questions": _QUESTIONS,
                "pictures": _PICTURES,
            },
            "key",
        ),
        request=_inbox_post,
        text=_inbox_posted,
        shape=RUNTIME_QUESTIONS,
        pictures_in="body",
    ),
    ToolSpec(
        name="comms_inbox_reply",
        arm="inbox_reply",
        label="Reply in inbox",
        approval="write",
        destructive=False,
        idempotent=False,
        description=(
            "Add a message without an ask to one of your inbox items, by its key: text, "
            "pictures from your sandbox, or both."
        ),
        parameters=_params(
            {"key": _KEY, "text": schema.text_param("The message"), "pictures": _PICTURES}, "key"
        ),
        request=lambda args: gw.InboxReplyRequest(
            key=args["key"], text=args.get("text", ""), pictures=_files(args)
        ),
        text=lambda args, res: (
            f'Replied in inbox item "{_one_line(args["key"])}".' + attachments_text(res.message)
        ),
        pictures_in="text",
    ),
    ToolSpec(
        name="comms_inbox_close",
        arm="inbox_close",
        label="Withdraw inbox ask",
        approval="write",
        destructive=True,
        idempotent=True,
        description=(
            "Withdraw the open ask of one of your inbox items, saying why; the item closes "
            "and takes no answer. Closing again succeeds again, and so does closing an item "
            "a person already closed or whose ask they declined (the result says so). If it "
            "fails with already_exists, the item was answered first (that answer arrives in a "
            "later turn on your delivery lane) or holds only a note. To change the question, "
            "post the new ask under the same key instead: it replaces the old one."
        ),
        parameters=_params(
            {"key": _KEY, "reason": schema.text_param("Why you withdraw it", max_length=1000)},
            "key",
            "reason",
        ),
        request=lambda args: gw.InboxCloseRequest(key=args["key"], reason=args["reason"]),
        text=_inbox_closed,
        meanings={
            "already_exists": (
                "The item has no open ask to withdraw: it was answered first (that answer "
                "arrives in a later turn on your delivery lane) or it holds only a note"
            )
        },
    ),
    ToolSpec(
        name="comms_spawn_agent",
        arm="spawn_agent",
        label="Spawn sub-agent",
        approval="write",
        destructive=False,
        idempotent=False,
        description=(
            "Create a sub-agent under you: a new agent with your owner, assigned to your "
            "runner, that takes part in every channel you take part in and posts and asks "
            "there under its own name (people see it as yours › its handle). It starts with "
            "no session: the runner binds it to run it. Returns its account id."
        ),
        parameters=_params(
            {
                "handle": schema.text_param(
                    "Its handle, unique in the workspace", max_length=MAX_HANDLE_CHARS
                )
            },
            "handle",
        ),
        request=lambda args: gw.SpawnAgentRequest(handle=args["handle"]),
        text=lambda args, res: (
            f"Spawned sub-agent @{_one_line(res.agent.handle)} "
            f'id="{res.agent.account_id}" under you.'
        ),
        meanings={
            "already_exists": "Another account has that handle: choose another",
            "resource_exhausted": (
                "Your tree is at its depth or size limit: it takes no more sub-agents here"
            ),
        },
    ),
)
