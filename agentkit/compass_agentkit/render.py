"""Messages as text for an agent: what the comms_list_messages tool shows.

Each block of each message is one entry, in the order given (the caller
picks reading order):

    @<handle> (<message_id>): <text>
    @<handle> (<message_id>): [ask <fence> id="<ask_id>"] <question>
    @<handle> (<message_id>): [answered <fence> id="<ask_id>"] <question> → <answer>
    @<handle> (<message_id>): [withdrawn <fence> id="<ask_id>"] <question>
    @<handle> (<message_id>): [answer <fence> id="<ask_id>"] <question> → <answer>

An ask renders one entry per question; `answer` is the ask_answer snapshot a
person's reply posts. A withdrawn ask is checked first, so it never shows as
open or answered. An ask with no question text renders its marker alone
(`[withdrawn <fence> id="…"]`, `[ask <fence> id="…"]`, …), so its id is never
lost. `<answer>` is the chosen labels joined by ", ", then `other: <text>` for
free text, joined by "; "; `(skipped)` when neither; ` (timed out)` after a
timeout's answer. The handle falls back to the author's account id.

What message text cannot forge:

- `<fence>` is a random token drawn per render and redrawn until no rendered
  string (text, question, label, handle, id) contains it, so a marker that
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

__all__ = ["Rendering", "answer_text", "continued", "new_fence", "render_messages"]

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


def answer_text(question: comms_pb2.AskQuestion) -> str:
    """One question's answer: the chosen labels, then `other: <text>`."""
    labels = {option.id: option.label for option in question.options}
    parts = []
    chosen = [labels[i] for i in question.chosen_option_ids if i in labels]
    if chosen:
        parts.append(", ".join(chosen))
    if question.custom_text:
        parts.append(f"other: {question.custom_text}")
    answer = "; ".join(parts) or "(skipped)"
    return answer + (" (timed out)" if question.timed_out else "")


def continued(line: str) -> str:
    """Every line break, of any kind, continues indented: text inside an
    entry can't start a line that looks like another entry."""
    return "\n  ".join(line.splitlines())


def _answer(question: comms_pb2.AskQuestion) -> str:
    return f" → {answer_text(question)}"


def _marker_bodies(
    kind: str, questions: Iterable[comms_pb2.AskQuestion], answered: bool
) -> list[tuple[str, str]]:
    bodies = [
        (kind, q.question + (_answer(q) if answered else ""))
        for q in questions
        if q.question.strip()
    ]
    return bodies or [(kind, "")]


def _entries(message: comms_pb2.Message) -> Iterator[_Entry]:
    author = message.author_handle or message.author_account_id
    for block in message.blocks:
        which = block.WhichOneof("block")
        if which == "text":
            yield _Entry(author, message.message_id, None, block.text.text)
            continue
        if which == "ask":
            ask = block.ask
            # Withdrawn first: a withdrawn ask takes no answer, whatever else it says.
            if ask.cancelled:
                bodies = _marker_bodies("withdrawn", ask.questions, answered=False)
            elif ask.answered:
                bodies = _marker_bodies("answered", ask.questions, answered=True)
            else:
                bodies = _marker_bodies("ask", ask.questions, answered=False)
            ask_id = ask.ask_id
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
