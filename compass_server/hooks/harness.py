"""The harnesses' own hook JSON, translated at the edge: a request becomes an
ask (the same blocks any agent posts), and the ask's ending becomes the
decision in the harness's exact output format.

Formats (the fixtures in tests/hooks/ cite their sources and versions):

- Claude Code `PermissionRequest`: answered with
  `{"hookSpecificOutput":{"hookEventName":"PermissionRequest","decision":{"behavior":"allow"}}}`
  or `…{"behavior":"deny","message":"…"}`.
- Claude Code `PreToolUse`: for `AskUserQuestion`, `permissionDecision` allow
  with `updatedInput` = the questions as sent plus `answers` keyed by
  question text (multi-select labels joined by ", "); for any other tool,
  allow or deny with `permissionDecisionReason`.
- Codex `PermissionRequest`: `decision.behavior` allow, or deny with `message`.
- Codex `notify` (agent-turn-complete): a message in the channel, no ask.

No decision ("ask" as the fallback, or a policy rule that never asks) is
Claude Code's `{}` plus a `systemMessage` saying why, and Codex's empty
output: both harnesses then prompt as they would without Compass.
"""

from __future__ import annotations

import base64
import hashlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from compass.v1 import comms_pb2 as pb
from compass_agentkit.harness import (
    CLAUDE_CODE,
    CODEX,
    HARNESSES,
    PERMISSION_REQUEST,
    PRE_TOOL_USE,
    allow,
    deny,
    fallback,
)
from compass_agentkit.native_ask import MappedAsk, map_coding_agent_ask
from compass_server.api.mapping import blocks_from_wire
from compass_server.hooks.policy import Rule, subject_of
from compass_server.store import blocks as blockrules
from compass_server.store.types import (
    Answer,
    Ask,
    AskOption,
    AskQuestion,
    Block,
    EndingKind,
    TextBlock,
    VoteKind,
)

NOTIFY = "agent-turn-complete"
ASK_USER_QUESTION = "AskUserQuestion"
# A permission ask's one question and its choices.
DECISION = "decision"
ALLOW, ALWAYS, DENY = "allow", "always", "deny"
# A subject longer than this is named in the question by its digest.
QUESTION_SUBJECT_CHARS = 1_000


class BadRequest(Exception):
    """A hook request this route can't read; the message says what is wrong."""


def _text(value: object, where: str, *, required: bool = True) -> str:
    if value is None and not required:
        return ""
    if not isinstance(value, str):
        raise BadRequest(f"{where} is {'missing' if value is None else 'not a string'}")
    return value


@dataclass(frozen=True, slots=True)
class Request:
    harness: str
    event: str
    session_id: str
    cwd: str
    tool_name: str
    tool_input: Mapping[str, Any]
    # Codex notify's payload, for a message.
    note: Mapping[str, Any] | None = None

    @property
    def questions(self) -> bool:
        """AskUserQuestion: the agent asks its person questions."""
        return self.tool_name == ASK_USER_QUESTION

    @property
    def subject(self) -> str:
        return subject_of(self.tool_name, self.tool_input)

    @property
    def reason(self) -> str:
        """The agent's stated reason, where its tool carries one."""
        value = self.tool_input.get("description")
        return value if isinstance(value, str) else ""


def parse(harness: str, body: object) -> Request:
    """A hook's JSON as the harness sends it; BadRequest says what is wrong."""
    if not isinstance(body, dict):
        raise BadRequest("the body is a JSON object of the harness's hook input")
    if harness == CODEX and body.get("type") == NOTIFY:
        return Request(
            CODEX,
            NOTIFY,
            _text(body.get("thread-id"), "thread-id", required=False),
            _text(body.get("cwd"), "cwd", required=False),
            "",
            {},
            note=body,
        )
    event = _text(body.get("hook_event_name"), "hook_event_name")
    allowed = (
        (PERMISSION_REQUEST, PRE_TOOL_USE) if harness == CLAUDE_CODE else (PERMISSION_REQUEST,)
    )
    if event not in allowed:
        raise BadRequest(
            f"{HARNESSES[harness]}'s {event[:60]!r} hook is not one Compass answers here "
            f"(it takes {', '.join(allowed)})"
        )
    tool_input = body.get("tool_input")
    if not isinstance(tool_input, dict):
        raise BadRequest("tool_input is missing or not an object")
    tool = _text(body.get("tool_name"), "tool_name")
    if not tool:
        raise BadRequest("tool_name is empty")
    return Request(
        harness,
        event,
        _text(body.get("session_id"), "session_id"),
        _text(body.get("cwd"), "cwd", required=False),
        tool,
        tool_input,
    )


def _one_line(text: str, most: int) -> str:
    line = " ".join(text.split())
    return line if len(line) <= most else line[: most - 1] + "…"


def _digest(text: str) -> str:
    raw = hashlib.sha256(text.encode("utf-8", "surrogatepass")).digest()
    return "sha256:" + base64.urlsafe_b64encode(raw).rstrip(b"=").decode()


def _who(rule: Rule) -> str:
    if not rule.answerer_handles:
        return "anyone in this channel may answer"
    people = ", ".join(f"@{h}" for h in rule.answerer_handles)
    if rule.quorum:
        return f"{rule.quorum} of {people} must answer"
    return f"{people} may answer"


def describe(request: Request, rule: Rule) -> str:
    """The ask's text: who asks, for what, where and why."""
    harness = HARNESSES[request.harness]
    where = f" in {request.cwd}" if request.cwd else ""
    session = f" (session {request.session_id})" if request.session_id else ""
    if request.questions:
        lines = [f"{harness} asks{where}{session}:"]
    else:
        lines = [f"{harness} asks to use {request.tool_name}{where}{session}:", ""]
        lines += ["    " + line for line in request.subject.splitlines() or [""]]
        if request.reason:
            lines += ["", f"Reason: {request.reason}"]
    if rule.name:
        lines += ["", f'Rule "{rule.name}": {_who(rule)}.']
    elif rule.answerer_handles:
        lines += ["", f"{_who(rule)}."]
    return _bounded("\n".join(lines))


def _bounded(text: str) -> str:
    if len(text) <= blockrules.MAX_TEXT_CHARS:
        return text
    return text[: blockrules.MAX_TEXT_CHARS - 1] + "…"


def permission_question(request: Request, rule: Rule, agent: str, always_for: str) -> AskQuestion:
    """One question whose text is the same for every request a standing answer
    may answer: the rule's name, or the exact request (by its digest when long)."""
    tool = request.tool_name
    if rule.name:
        question = f'Allow this {tool} request under the rule "{rule.name}"?'
        scope = f'every later request of @{agent} under the rule "{rule.name}"'
    else:
        subject = request.subject
        shown = (
            subject
            if len(subject) <= QUESTION_SUBJECT_CHARS and "\n" not in subject
            else f"the input {_digest(subject)}"
        )
        question = f"Allow {tool}: {shown}?"
        scope = f"this same {tool} request whenever @{agent} makes it again"
    options = [AskOption(ALLOW, "Allow", "Allow this request once.")]
    if rule.always_allow:
        options.append(
            AskOption(
                ALWAYS,
                "Always allow this rule",
                f"Allow it, and {scope}, for {always_for}: answered at once, shown here, "
                "revocable under Standing answers.",
            )
        )
    options.append(
        AskOption(DENY, "Deny", "Deny it; what you type under Other is the reason the agent reads.")
    )
    return AskQuestion(
        question_id=DECISION,
        question=question,
        header=tool[: blockrules.MAX_HEADER_CHARS],
        options=tuple(options),
    )


def ask_blocks(request: Request, rule: Rule, agent: str, always_for: str) -> list[Block]:
    """What the request posts: its text and one ask (answerers and quorum
    from the rule); BadRequest when AskUserQuestion's questions don't map."""
    text = TextBlock(describe(request, rule))
    if request.questions:
        mapped = map_coding_agent_ask(dict(request.tool_input))
        if not isinstance(mapped, MappedAsk):
            raise BadRequest(f"AskUserQuestion's tool_input: {mapped.reason}")
        (block,) = blocks_from_wire([_ask_block(mapped)])
        assert isinstance(block, Ask)
        questions = block.questions
    else:
        questions = (permission_question(request, rule, agent, always_for),)
    return [
        text,
        Ask(questions=questions, answerer_ids=rule.answerer_ids, quorum=rule.quorum),
    ]


def _ask_block(mapped: MappedAsk) -> pb.MessageBlock:
    return pb.MessageBlock(ask=mapped.ask)


# --- the way back ---------------------------------------------------------------------


def _answers_of(ask: Ask) -> list[tuple[str, Sequence[Answer]]]:
    """Each answerer's answers: the questions' own state, or a quorum's
    answer votes in the order recorded."""
    if ask.quorum:
        return [(v.handle, v.answers) for v in ask.quorum_votes if v.kind is VoteKind.ANSWER]
    handle = ask.ending.actor_handle if ask.ending else ""
    return [
        (
            handle,
            [Answer(q.question_id, q.chosen_option_ids, q.custom_text) for q in ask.questions],
        )
    ]


def ending_words(ask: Ask) -> str:
    """An ending other than an answer, in one line."""
    ending = ask.ending
    kind = ending.kind if ending else None
    who = f"@{ending.actor_handle}" if ending and ending.actor_handle else "someone"
    if kind is EndingKind.DECLINED:
        reason = f": {_one_line(ending.reason, 300)}" if ending and ending.reason else ""
        return f"the ask was declined by {who}{reason}"
    if kind is EndingKind.EXPIRED:
        return "nobody answered the ask before its deadline"
    if kind is EndingKind.WITHDRAWN_BY_OWNER:
        return f"the ask was withdrawn by {who}, the agent's owner"
    return "the ask was withdrawn"


def decided(request: Request, ask: Ask, fallback_kind: str) -> tuple[bytes, str]:
    """The harness's output for an ended ask, and a one-line reason when it
    is the fallback (empty for a person's decision)."""
    if ask.ending is None or ask.ending.kind is not EndingKind.ANSWERED:
        why = ending_words(ask)
        return fallback(request.harness, request.event, fallback_kind, why), why
    answers = _answers_of(ask)
    if request.questions:
        return allow(request.event, _updated_input(request, ask, answers[0][1])), ""
    denials = []
    for handle, given in answers:
        chosen = next((a for a in given if a.question_id == DECISION), None)
        picked = set(chosen.chosen_option_ids) if chosen else set()
        if picked & {ALLOW, ALWAYS}:
            continue
        text = chosen.custom_text.strip() if chosen else ""
        denials.append(f"Denied by @{handle}" + (f": {_one_line(text, 2000)}" if text else ""))
    if denials:
        return deny(request.event, "; ".join(denials)), ""
    return allow(request.event), ""


def _updated_input(request: Request, ask: Ask, given: Sequence[Answer]) -> dict[str, Any]:
    """AskUserQuestion's input as sent, with `answers` keyed by question text."""
    by_id = {a.question_id: a for a in given}
    answers: dict[str, str] = {}
    for q in ask.questions:
        a = by_id.get(q.question_id)
        if a is None:
            continue
        labels = {o.id: o.label for o in q.options}
        parts = [labels[i] for i in a.chosen_option_ids if i in labels]
        if a.custom_text:
            parts.append(a.custom_text)
        if parts:
            answers[q.question] = ", ".join(parts)
    return {**request.tool_input, "answers": answers}


def note_text(request: Request) -> str:
    """Codex's agent-turn-complete, as a message in the channel."""
    note = request.note or {}
    said = note.get("last-assistant-message")
    last = said if isinstance(said, str) else ""
    where = f" in {request.cwd}" if request.cwd else ""
    thread = f" (thread {request.session_id})" if request.session_id else ""
    head = f"Codex finished a turn{where}{thread}."
    return _bounded(f"{head}\n\n{last}" if last else head)
