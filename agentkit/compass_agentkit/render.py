"""Messages as text for an agent: what the comms_list_messages tool shows.

Each block of each message is one entry, in the order given (the caller
picks reading order):

    @<handle> (<message_id>): <text>
    @<handle> (<message_id>): [ask <fence> id="<ask_id>"] <question>
    @<handle> (<message_id>): [answered <fence> id="<ask_id>"] <question> → <answer>
    @<handle> (<message_id>): [declined <fence> id="<ask_id>"] <question>
    @<handle> (<message_id>): [expired <fence> id="<ask_id>"] <question>
    @<handle> (<message_id>): [withdrawn <fence> id="<ask_id>"] <question>
    @<handle> (<message_id>): [withdrawn-by-owner <fence> id="<ask_id>"] <question>
    @<handle> (<message_id>): [answer <fence> id="<ask_id>"] <question> → <answer>

An ask renders one entry per question, its marker saying how it ended (the
rows of endings.py: `withdrawn` is its agent's own withdrawal,
`withdrawn-by-owner` the agent's owner's; an inbox ask's may also be
`withdrawn-by-person` or `replaced`); `answer` is the ask_answer
snapshot a person's reply posts. The ask's first entry ends with a note in
parentheses, said once for the whole ask: `(declined by @ada: <reason>)`,
`(withdrawn by @ada, the owner of the agent that asked)`, `(nobody answered
by <time>)`, and on an open ask `(asked of @ada, @bob; deadline <time>)`
when it names answerers or has a deadline. Times are RFC 3339 UTC. An ask
with no question text renders its marker alone (`[withdrawn <fence>
id="…"]`, `[ask <fence> id="…"]`, …, then its note), so its id is never
lost. `<answer>` is the chosen labels joined by ", ", then `other: <text>`
for free text, joined by "; "; `(skipped)` when neither; ` (timed out)`
after a timeout's answer. The handle falls back to the author's account id.

What message text cannot forge:

- `<fence>` is a random token drawn per render and redrawn until no rendered
  string (text, question, label, handle, id, note) contains it, so a marker that
  carries it was written here.
- The id is quoted with `\\` and `"` escaped, so an id cannot close its own
  marker. An id that is not 1–128 printable ASCII characters without spaces
  renders as `(malformed <fence>)` in its place.
- A line break inside an entry continues on a line indented by two spaces, so
  text cannot start a line that looks like another message.
"""

from __future__ import annotations

import re
import secrets
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass

from compass.v1 import comms_pb2
from compass_agentkit.endings import answer_text, answerers, continued, ending_of, rfc3339

__all__ = ["Rendering", "new_fence", "render_messages"]

_SAFE_ID = re.compile(r"[!-~]{1,128}")


def new_fence() -> str:
    return secrets.token_hex(4)


@dataclass(frozen=True, slots=True)
class Rendering:
    """The entries of one render and the fence their markers carry."""

    fence: str
    lines: tuple[str, ...]

    @property
    def text(self) -> str:
        return "\n".join(self.lines)


@dataclass(frozen=True, slots=True)
class _Entry:
    author: str
    message_id: str
    # (kind, ask_id) for a marker entry, None for plain text.
    marker: tuple[str, str] | None
    body: str

    def untrusted(self) -> Iterator[str]:
        yield self.author
        yield self.message_id
        if self.marker is not None:
            yield self.marker[1]
        yield self.body


def _answer(question: comms_pb2.AskQuestion) -> str:
    return f" → {answer_text(question)}"


def _marker_bodies(
    kind: str, questions: Iterable[comms_pb2.AskQuestion], answered: bool, note: str = ""
) -> list[tuple[str, str]]:
    bodies = [
        (kind, q.question + (_answer(q) if answered else ""))
        for q in questions
        if q.question.strip()
    ]
    bodies = bodies or [(kind, "")]
    if note:
        # Said once, on the first entry: it is the ask's, not each question's.
        first_kind, first = bodies[0]
        bodies[0] = (first_kind, f"{first} ({note})" if first else f"({note})")
    return bodies


def _open_note(ask: comms_pb2.Ask) -> str:
    parts = []
    if ask.answerer_account_ids:
        parts.append("asked of " + ", ".join(answerers(ask)))
    if ask.quorum:
        answered = sum(1 for v in ask.quorum_votes if v.kind == comms_pb2.QUORUM_VOTE_KIND_ANSWER)
        parts.append(f"needs {ask.quorum} answers, {answered} so far")
    if ask.HasField("deadline"):
        parts.append(f"deadline {rfc3339(ask.deadline)}")
    return "; ".join(parts)


def _ask_bodies(ask: comms_pb2.Ask) -> list[tuple[str, str]]:
    """The entries of one ask: its marker from how it ended, and what the
    ending (or, while open, the ask) says once."""
    ending = ending_of(ask)
    if ending is None:
        return _marker_bodies("ask", ask.questions, False, _open_note(ask))
    kind = ending.kind
    return _marker_bodies(kind.marker, ask.questions, kind.name == "answered", kind.note(ask))


def _entries(message: comms_pb2.Message) -> Iterator[_Entry]:
    author = message.author_handle or message.author_account_id
    for block in message.blocks:
        which = block.WhichOneof("block")
        if which == "text":
            yield _Entry(author, message.message_id, None, block.text.text)
            continue
        if which == "ask":
            bodies = _ask_bodies(block.ask)
            ask_id = block.ask.ask_id
        elif which == "ask_answer":
            bodies = _marker_bodies("answer", block.ask_answer.questions, answered=True)
            ask_id = block.ask_answer.ask_id
        else:
            continue  # a block kind this reader does not know
        for kind, body in bodies:
            yield _Entry(author, message.message_id, (kind, ask_id), body)


def _attr(value: str, fence: str) -> str:
    if not _SAFE_ID.fullmatch(value):
        return f"(malformed {fence})"
    return value.replace("\\", "\\\\").replace('"', '\\"')


def _line(entry: _Entry, fence: str) -> str:
    content = entry.body
    if entry.marker is not None:
        kind, ask_id = entry.marker
        marker = f'[{kind} {fence} id="{_attr(ask_id, fence)}"]'
        content = f"{marker} {content}" if content else marker
    return continued(f"@{entry.author} ({entry.message_id}): {content}")


def render_messages(
    messages: Iterable[comms_pb2.Message], *, new_fence: Callable[[], str] = new_fence
) -> Rendering:
    """Render messages for an agent; see the module docstring for the format."""
    entries = [entry for message in messages for entry in _entries(message)]
    untrusted = [s for entry in entries for s in entry.untrusted()]
    fence = new_fence()
    while not fence or any(fence in s for s in untrusted):
        fence = new_fence()
    return Rendering(fence, tuple(_line(entry, fence) for entry in entries))
