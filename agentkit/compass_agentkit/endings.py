"""How an ask ended, in the words an agent reads, and the endings an agent
has heard of.

An ask ends once. Each kind of ending is one row of ENDINGS: its name, how
to tell it from the ask's server-owned state, and its words. Today an ask
ends by an answer or by a withdrawal; a new kind (a deadline, a decline) is
one more row, checked in order, and every reader (the MCP `ask` and
`check_ask` tools, `comms_get_ask`) knows it.

`AskEndings` keeps the endings one agent session has heard of, by ask id,
and wakes whoever waits on them. It is fed from the delivery lane (an update
of the agent's own ask) and in process (the agent's own withdrawal, which
the lane does not carry back to it).
"""

from __future__ import annotations

import asyncio
import collections
from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import Any

from compass.v1 import comms_pb2 as pb
from compass_agentkit.native_ask import answers_from_ask
from compass_agentkit.render import answer_text, continued

__all__ = [
    "ENDINGS",
    "AskEndings",
    "Ending",
    "EndingKind",
    "ask_state",
    "ending_of",
    "state_text",
    "withdrawn_by_me",
]

# Endings kept per session for asks nobody waits on yet (an answer that
# comes before its waiter); the oldest go first.
KEPT_ENDINGS = 1024


def _one_line(text: str) -> str:
    return " ".join(text.split())


def _answered(ask: pb.Ask) -> str:
    lines = [f"Ask {ask.ask_id} was answered:"]
    lines += [continued(f"- {_one_line(q.question)} → {answer_text(q)}") for q in ask.questions]
    return "\n".join(lines)


def _withdrawn(ask: pb.Ask) -> str:
    return f"Ask {ask.ask_id} was withdrawn; it takes no answer."


@dataclass(frozen=True, slots=True)
class EndingKind:
    name: str
    # Whether the ask ended this way, from its server-owned state.
    ended: Callable[[pb.Ask], bool]
    words: Callable[[pb.Ask], str]


# Checked in order: a withdrawn ask takes no answer, whatever else it says.
ENDINGS: tuple[EndingKind, ...] = (
    EndingKind("withdrawn", lambda ask: ask.cancelled, _withdrawn),
    EndingKind("answered", lambda ask: ask.answered, _answered),
)


@dataclass(frozen=True, slots=True)
class Ending:
    kind: EndingKind
    ask: pb.Ask

    @property
    def name(self) -> str:
        return self.kind.name

    @property
    def text(self) -> str:
        return self.kind.words(self.ask)


def ending_of(ask: pb.Ask) -> Ending | None:
    """How the ask ended, or None while it is open."""
    for kind in ENDINGS:
        if kind.ended(ask):
            return Ending(kind, ask)
    return None


def withdrawn_by_me(ask_id: str) -> Ending:
    """The agent's own withdrawal, known in process: the server acknowledged
    it, and the lane does not carry an agent's own changes back to it."""
    ending = ending_of(pb.Ask(ask_id=ask_id, cancelled=True))
    assert ending is not None
    return ending


def state_text(ask: pb.Ask) -> str:
    """The ask's ending in words, or that it is open and what it asks."""
    ending = ending_of(ask)
    if ending is not None:
        return ending.text
    lines = [f"Ask {ask.ask_id} is open: nobody has answered it yet. It asks:"]
    lines += [continued(f"- {_one_line(q.question)}") for q in ask.questions]
    return "\n".join(lines)


def ask_state(ask: pb.Ask) -> dict[str, Any]:
    """The same as structured content: the state and each question's answer."""
    ending = ending_of(ask)
    state: dict[str, Any] = {"ask_id": ask.ask_id, "state": ending.name if ending else "open"}
    if ask.answered and not ask.cancelled:
        questions = {q.question_id: q.question for q in ask.questions}
        state["answers"] = [
            {**asdict(result), "question": questions.get(result.question_id, "")}
            for result in answers_from_ask(ask)
        ]
    return state


class AskEndings:
    """The endings one agent session heard of, by ask id; the first one heard
    for an ask is its ending."""

    def __init__(self, kept: int = KEPT_ENDINGS) -> None:
        self.kept = kept
        self._endings: collections.OrderedDict[str, Ending] = collections.OrderedDict()
        self._waiters: dict[str, list[asyncio.Future[Ending]]] = {}

    def __len__(self) -> int:
        return len(self._endings)

    def get(self, ask_id: str) -> Ending | None:
        return self._endings.get(ask_id)

    def heard(self, ask: pb.Ask) -> Ending | None:
        """Records the ask's ending, if it has one; returns it."""
        ending = ending_of(ask)
        if ending is not None:
            self.ended(ending)
        return ending

    def ended(self, ending: Ending) -> None:
        ask_id = ending.ask.ask_id
        if ask_id in self._endings:
            return
        self._endings[ask_id] = ending
        while len(self._endings) > self.kept:
            self._endings.popitem(last=False)
        for waiter in self._waiters.pop(ask_id, []):
            if not waiter.done():
                waiter.set_result(ending)

    async def wait(self, ask_id: str) -> Ending:
        """The ask's ending, as soon as one is heard."""
        found = self._endings.get(ask_id)
        if found is not None:
            return found
        waiter: asyncio.Future[Ending] = asyncio.get_running_loop().create_future()
        self._waiters.setdefault(ask_id, []).append(waiter)
        try:
            return await waiter
        finally:
            # A waiter that gave up (cancelled, timed out) leaves nothing behind.
            waiting = self._waiters.get(ask_id)
            if waiting is not None and waiter in waiting:
                waiting.remove(waiter)
                if not waiting:
                    del self._waiters[ask_id]

    @property
    def waiting(self) -> int:
        return sum(len(w) for w in self._waiters.values())
