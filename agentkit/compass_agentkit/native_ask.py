"""The agent runtime's native `ask` tool call, mapped onto one compass.v1.Ask.

The runtime's tool arguments are untyped JSON:

    {"questions": [{"id", "question", "header"?, "options": [{"label",
      "description"?, "preview"?}], "multi"?, "recommended"?}]}

One tool call becomes ONE Ask, question for question:

    questions[i].id           → questions[i].question_id (passed through)
    questions[i].question     → questions[i].question
    questions[i].header?      → questions[i].header (absent → "")
    questions[i].multi?       → questions[i].allow_multiple (absent → False)
    questions[i].recommended? → questions[i].recommended (absent → unset)
    options[j].label / .description? / .preview? → options[j] likewise
    (options have no id)      → options[j].id = "0", "1", … (the index)

ask_id stays empty (the server mints it) and the answer state stays empty.
A question with no options is a free-text-only question, not a malformation.

The runtime times its ask tool out after its `ask.timeout` setting (seconds,
0 for none; off in plan mode), which is no argument of the call. A runner
that knows it passes it on (`timeout_seconds`, `EventMapper(ask_timeout_seconds=…)`)
and the Ask carries it as its `timeout`, which the server turns into a
deadline (the server's bounds apply: by default 1 minute to 30 days, and a
shorter one is refused). Where the runtime would then pick the recommended
option by itself, Compass picks nothing for a person: the ask expires, and
its way back reads every question timed out with nothing chosen.

Every value is narrowed at run time to the exact JSON type it must have. Any
malformation (a wrong type, a missing key, no questions, an empty or repeated
question id) turns the whole call into one `Unmapped` naming it: never an
exception, never an ask holding only the valid questions.

Coding agents' own question tool takes a second shape, which
`map_coding_agent_ask` maps the same way, with the same narrowing:

    {"questions": [{"question", "header"?, "options": [{"label",
      "description"?, "preview"?}], "multiSelect"?}]}

    (questions have no id)     → questions[i].question_id = "1", "2", … (the position)
    questions[i].multiSelect?  → questions[i].allow_multiple (absent → False)
    (no recommendation)        → recommended unset

The way back: `answers_from_ask` reads an answered ask (or its ask_answer
snapshot) as the runtime's per-question results, labels looked up by id.
"""

from __future__ import annotations

import datetime
import math
from dataclasses import dataclass

from compass.v1 import comms_pb2

__all__ = [
    "ASK_TOOL",
    "END_EVENT",
    "START_EVENT",
    "EventMapper",
    "MappedAsk",
    "QuestionResult",
    "Unmapped",
    "answers_from_ask",
    "map_coding_agent_ask",
    "map_native_ask",
]

ASK_TOOL = "ask"
START_EVENT = "tool_execution_start"
END_EVENT = "tool_execution_end"
# The event_type of a coding-agent question call that could not be mapped.
QUESTION_TOOL = "question_tool"

_INT32_MIN = -(2**31)
_INT32_MAX = 2**31 - 1


@dataclass(frozen=True, slots=True)
class MappedAsk:
    """A well-formed ask call: the Ask to post, and the call it came from."""

    ask: comms_pb2.Ask
    tool_call_id: str = ""


@dataclass(frozen=True, slots=True)
class Unmapped:
    """An event the mapper could not turn into an ask; the caller logs and counts it."""

    event_type: str
    reason: str


@dataclass(frozen=True, slots=True)
class QuestionResult:
    """One question's answer in the runtime's terms: option labels, not ids."""

    question_id: str
    selected_options: list[str]
    custom_input: str | None
    timed_out: bool


class _Malformed(Exception):
    """Stops narrowing at the first malformation; never leaves this module."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


# Exact types only: JSON decoding never yields subclasses, and a subclass can
# answer for keys it does not hold or iterate items it does not store.
def _object(value: object, path: str) -> dict[object, object]:
    if type(value) is not dict:
        raise _Malformed(f"{path} is not an object")
    return value


def _list(value: object, path: str) -> list[object]:
    if type(value) is not list:
        raise _Malformed(f"{path} is not a list")
    return value


def _text(value: object, path: str) -> str:
    if type(value) is not str:
        raise _Malformed(f"{path} is not a string")
    try:
        # Protobuf strings are UTF-8; a lone surrogate from JSON is not.
        value.encode("utf-8")
    except UnicodeEncodeError:
        raise _Malformed(f"{path} is not valid text") from None
    return value


def _required(obj: dict[object, object], key: str, path: str) -> object:
    if key not in obj:
        raise _Malformed(f"{path}.{key} is missing")
    return obj[key]


def _optional_text(obj: dict[object, object], key: str, path: str) -> str:
    return _text(obj[key], f"{path}.{key}") if key in obj else ""


def _index(value: object, path: str) -> int:
    if type(value) is int:
        number = value
    elif type(value) is float and math.isfinite(value) and value.is_integer():
        number = int(value)  # JSON has one number type: 1.0 is the index 1
    else:
        raise _Malformed(f"{path} is not an integer")
    if not _INT32_MIN <= number <= _INT32_MAX:
        raise _Malformed(f"{path} is out of range")
    return number


def _option(value: object, index: int, path: str) -> comms_pb2.AskOption:
    option = _object(value, path)
    return comms_pb2.AskOption(
        id=str(index),
        label=_text(_required(option, "label", path), f"{path}.label"),
        description=_optional_text(option, "description", path),
        preview=_optional_text(option, "preview", path),
    )


@dataclass(frozen=True, slots=True)
class _Shape:
    """Which keys one caller's question objects use."""

    # None: questions carry no id and are numbered by position.
    id_key: str | None
    multi_key: str
    recommended: bool


_RUNTIME = _Shape(id_key="id", multi_key="multi", recommended=True)
_CODING_AGENT = _Shape(id_key=None, multi_key="multiSelect", recommended=False)


def _question(value: object, index: int, path: str, shape: _Shape) -> comms_pb2.AskQuestion:
    item = _object(value, path)
    if shape.id_key is None:
        question_id = str(index + 1)
    else:
        question_id = _text(_required(item, shape.id_key, path), f"{path}.{shape.id_key}")
        if not question_id:
            raise _Malformed(f"{path}.{shape.id_key} is empty")
    text = _text(_required(item, "question", path), f"{path}.question")
    header = _optional_text(item, "header", path)
    options = _list(_required(item, "options", path), f"{path}.options")
    mapped = [_option(o, j, f"{path}.options[{j}]") for j, o in enumerate(options)]
    multi = item.get(shape.multi_key, False)
    if type(multi) is not bool:
        raise _Malformed(f"{path}.{shape.multi_key} is not a boolean")
    question = comms_pb2.AskQuestion(
        question_id=question_id,
        question=text,
        header=header,
        options=mapped,
        allow_multiple=multi,
    )
    # Not bounds-checked against the options: the page shows an index out of
    # range as no recommendation.
    if shape.recommended and "recommended" in item:
        question.recommended = _index(item["recommended"], f"{path}.recommended")
    return question


def _ask(args: object, shape: _Shape) -> comms_pb2.Ask:
    obj = _object(args, "args")
    if "questions" not in obj:
        raise _Malformed("questions is missing")
    items = _list(obj["questions"], "questions")
    if not items:
        raise _Malformed("questions is empty")
    questions: list[comms_pb2.AskQuestion] = []
    first_seen: dict[str, int] = {}
    for i, item in enumerate(items):
        question = _question(item, i, f"questions[{i}]", shape)
        # Two questions under one id could never both be answered.
        earlier = first_seen.setdefault(question.question_id, i)
        if earlier != i:
            raise _Malformed(f"questions[{i}].id repeats questions[{earlier}].id")
        questions.append(question)
    return comms_pb2.Ask(questions=questions)


def map_native_ask(args: object, *, timeout_seconds: float | None = None) -> MappedAsk | Unmapped:
    """Map the `ask` tool's arguments onto one Ask, or say why they are
    malformed; with the runtime's timeout (seconds, 0 or None for none) the
    Ask carries it as its timeout."""
    try:
        ask = _ask(args, _RUNTIME)
    except _Malformed as malformed:
        return Unmapped(f"{START_EVENT}:{ASK_TOOL}", malformed.reason)
    if timeout_seconds:
        ask.timeout.FromTimedelta(datetime.timedelta(seconds=timeout_seconds))
    return MappedAsk(ask)


def map_coding_agent_ask(args: object) -> MappedAsk | Unmapped:
    """Map a coding agent's question-tool arguments onto one Ask, or say why
    they are malformed."""
    try:
        return MappedAsk(_ask(args, _CODING_AGENT))
    except _Malformed as malformed:
        return Unmapped(QUESTION_TOOL, malformed.reason)


class EventMapper:
    """Turns the runtime's tool events into asks, counting what it cannot map.

    Events are the runtime's JSON objects, e.g. ``{"type":
    "tool_execution_start", "toolName": "ask", "toolCallId": …, "args": …}``.
    Only the ask tool's start and a failed end produce output: the ask is
    defined by its start arguments, and a failure is never dropped.
    """

    def __init__(self, *, ask_timeout_seconds: float | None = None) -> None:
        if ask_timeout_seconds is not None and not 0 <= ask_timeout_seconds < math.inf:
            raise ValueError(f"ask_timeout_seconds must be 0 or more, not {ask_timeout_seconds}")
        # The runtime's own ask timeout, carried by every ask it maps.
        self.ask_timeout_seconds = ask_timeout_seconds
        self._unmapped = 0

    @property
    def unmapped_count(self) -> int:
        return self._unmapped

    def map(self, event: object) -> list[MappedAsk | Unmapped]:
        if type(event) is not dict or event.get("toolName") != ASK_TOOL:
            return []
        kind = event.get("type")
        output: MappedAsk | Unmapped
        if kind == START_EVENT:
            output = map_native_ask(event.get("args"), timeout_seconds=self.ask_timeout_seconds)
            call_id = event.get("toolCallId")
            if isinstance(output, MappedAsk) and type(call_id) is str:
                output = MappedAsk(output.ask, call_id)
        elif kind == END_EVENT and event.get("isError") is True:
            output = Unmapped(f"{END_EVENT}:{ASK_TOOL}", "the ask tool call failed")
        else:
            return []
        if isinstance(output, Unmapped):
            self._unmapped += 1
        return [output]


def answers_from_ask(ask: comms_pb2.Ask | comms_pb2.AskAnswerBlock) -> list[QuestionResult]:
    """Each question's answer state, with chosen option ids read back as labels.

    An id that names no option of its question yields no label: the server
    only stores ids it validated, so this is a reader's guard, not a case.
    """
    results: list[QuestionResult] = []
    for question in ask.questions:
        labels = {option.id: option.label for option in question.options}
        results.append(
            QuestionResult(
                question_id=question.question_id,
                selected_options=[labels[i] for i in question.chosen_option_ids if i in labels],
                custom_input=question.custom_text or None,
                timed_out=question.timed_out,
            )
        )
    return results
