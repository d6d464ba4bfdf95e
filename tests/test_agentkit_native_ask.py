"""The runtime's native `ask` tool call maps onto one compass.v1.Ask, or is counted."""

from __future__ import annotations

import copy
import datetime
import json
import math
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from compass.v1 import comms_pb2
from compass_agentkit.native_ask import (
    END_EVENT,
    START_EVENT,
    EventMapper,
    MappedAsk,
    QuestionResult,
    Unmapped,
    answers_from_ask,
    map_coding_agent_ask,
    map_native_ask,
)

# The shape the runtime's own gallery uses: two questions, one single-select
# with a recommendation, one multi-select with previews and no header.
TWO_QUESTIONS: dict[str, Any] = {
    "questions": [
        {
            "id": "db",
            "question": "Which database should the service use?",
            "header": "Storage",
            "options": [
                {"label": "PostgreSQL", "description": "Relational, already deployed"},
                {"label": "SQLite"},
            ],
            "recommended": 0,
        },
        {
            "id": "features",
            "question": "Which features ship first?",
            "options": [
                {"label": "Search", "preview": "GET /search?q=…"},
                {"label": "Export", "description": "CSV and JSON", "preview": "export.csv"},
                {"label": "Sharing"},
            ],
            "multi": True,
        },
    ]
}


def _mapped(args: object) -> comms_pb2.Ask:
    result = map_native_ask(args)
    assert isinstance(result, MappedAsk), result
    return result.ask


def _reason(args: object) -> str:
    result = map_native_ask(args)
    assert isinstance(result, Unmapped), result
    assert result.event_type == f"{START_EVENT}:ask"
    return result.reason


def _with(**fields: object) -> dict[str, Any]:
    """TWO_QUESTIONS with fields of its first question replaced."""
    args = copy.deepcopy(TWO_QUESTIONS)
    args["questions"][0].update(fields)
    return args


def _without(field: str) -> dict[str, Any]:
    args = copy.deepcopy(TWO_QUESTIONS)
    del args["questions"][0][field]
    return args


def _option(**fields: object) -> dict[str, Any]:
    args = copy.deepcopy(TWO_QUESTIONS)
    args["questions"][1]["options"][1] = fields
    return args


# --- the well-formed path -----------------------------------------------------


def test_two_question_start_maps_to_one_ask_with_two_questions() -> None:
    ask = _mapped(TWO_QUESTIONS)

    assert ask.ask_id == ""
    assert not ask.answered and not ask.cancelled
    assert [q.question_id for q in ask.questions] == ["db", "features"]
    first, second = ask.questions
    assert first.question == "Which database should the service use?"
    assert second.question == "Which features ship first?"


def test_multi_maps_to_allow_multiple_and_absent_multi_to_false() -> None:
    first, second = _mapped(TWO_QUESTIONS).questions
    assert first.allow_multiple is False
    assert second.allow_multiple is True
    assert _mapped(_with(multi=False)).questions[0].allow_multiple is False


def test_recommended_maps_and_absent_recommended_stays_unset() -> None:
    first, second = _mapped(TWO_QUESTIONS).questions
    assert first.HasField("recommended")
    assert first.recommended == 0
    assert not second.HasField("recommended")


def test_recommended_is_not_bounds_checked_against_the_options() -> None:
    # The page shows an out-of-range index as no highlight; the mapper passes it on.
    assert _mapped(_with(recommended=7)).questions[0].recommended == 7


def test_integral_float_recommended_is_an_index() -> None:
    # JSON has one number type: 1.0 is the index 1.
    assert _mapped(_with(recommended=1.0)).questions[0].recommended == 1


def test_headers_map_and_absent_header_is_empty() -> None:
    first, second = _mapped(TWO_QUESTIONS).questions
    assert first.header == "Storage"
    assert second.header == ""


def test_options_get_index_ids_and_keep_label_description_preview() -> None:
    first, second = _mapped(TWO_QUESTIONS).questions
    assert [(o.id, o.label, o.description, o.preview) for o in first.options] == [
        ("0", "PostgreSQL", "Relational, already deployed", ""),
        ("1", "SQLite", "", ""),
    ]
    assert [(o.id, o.label, o.description, o.preview) for o in second.options] == [
        ("0", "Search", "", "GET /search?q=…"),
        ("1", "Export", "CSV and JSON", "export.csv"),
        ("2", "Sharing", "", ""),
    ]


def test_duplicate_labels_still_get_distinct_ids() -> None:
    args = _with(options=[{"label": "Yes"}, {"label": "Yes"}])
    assert [o.id for o in _mapped(args).questions[0].options] == ["0", "1"]


def test_answer_state_is_empty_while_pending() -> None:
    for question in _mapped(TWO_QUESTIONS).questions:
        assert list(question.chosen_option_ids) == []
        assert question.custom_text == ""
        assert question.timed_out is False


def test_zero_option_question_maps_as_free_text_only() -> None:
    args = {"questions": [{"id": "why", "question": "Why did the deploy fail?", "options": []}]}
    (question,) = _mapped(args).questions
    assert question.question_id == "why"
    assert list(question.options) == []
    assert not question.HasField("recommended")


def test_unknown_keys_are_ignored() -> None:
    args = copy.deepcopy(TWO_QUESTIONS)
    args["timeout"] = 30
    args["questions"][0]["note"] = "extra"
    args["questions"][0]["options"][0]["color"] = "red"
    assert _mapped(args) == _mapped(TWO_QUESTIONS)


def test_mapped_ask_survives_the_wire() -> None:
    ask = _mapped(TWO_QUESTIONS)
    assert comms_pb2.Ask.FromString(ask.SerializeToString()) == ask


def test_mapping_does_not_change_the_input() -> None:
    args = copy.deepcopy(TWO_QUESTIONS)
    map_native_ask(args)
    assert args == TWO_QUESTIONS


# --- the malformed matrix -----------------------------------------------------

MALFORMED: list[tuple[str, object, str]] = [
    ("args null", None, "args is not an object"),
    ("args a list", [TWO_QUESTIONS], "args is not an object"),
    ("args a string", json.dumps(TWO_QUESTIONS), "args is not an object"),
    ("questions missing", {}, "questions is missing"),
    ("questions null", {"questions": None}, "questions is not a list"),
    ("questions an object", {"questions": {"0": {}}}, "questions is not a list"),
    ("questions empty", {"questions": []}, "questions is empty"),
    ("question not an object", {"questions": ["Which?"]}, "questions[0] is not an object"),
    ("id missing", _without("id"), "questions[0].id is missing"),
    ("id a number", _with(id=1), "questions[0].id is not a string"),
    ("id empty", _with(id=""), "questions[0].id is empty"),
    ("id duplicated", _with(id="features"), "questions[1].id repeats questions[0].id"),
    ("question missing", _without("question"), "questions[0].question is missing"),
    ("question null", _with(question=None), "questions[0].question is not a string"),
    ("header a number", _with(header=3), "questions[0].header is not a string"),
    ("header null", _with(header=None), "questions[0].header is not a string"),
    ("options missing", _without("options"), "questions[0].options is missing"),
    ("options a string", _with(options="yes,no"), "questions[0].options is not a list"),
    ("option a string", _with(options=["yes"]), "questions[0].options[0] is not an object"),
    ("label missing", _option(description="d"), "questions[1].options[1].label is missing"),
    ("label a number", _option(label=2), "questions[1].options[1].label is not a string"),
    (
        "description a list",
        _option(label="x", description=["d"]),
        "questions[1].options[1].description is not a string",
    ),
    (
        "preview a bool",
        _option(label="x", preview=True),
        "questions[1].options[1].preview is not a string",
    ),
    ("multi a string", _with(multi="true"), "questions[0].multi is not a boolean"),
    ("multi a number", _with(multi=1), "questions[0].multi is not a boolean"),
    ("recommended a bool", _with(recommended=True), "questions[0].recommended is not an integer"),
    ("recommended a string", _with(recommended="0"), "questions[0].recommended is not an integer"),
    (
        "recommended a fraction",
        _with(recommended=0.5),
        "questions[0].recommended is not an integer",
    ),
    ("recommended NaN", _with(recommended=math.nan), "questions[0].recommended is not an integer"),
    (
        "recommended infinite",
        _with(recommended=math.inf),
        "questions[0].recommended is not an integer",
    ),
    (
        "recommended past int32",
        _with(recommended=2**31),
        "questions[0].recommended is out of range",
    ),
    (
        "lone surrogate",
        _with(question="broken \ud800 text"),
        "questions[0].question is not valid text",
    ),
]


@pytest.mark.parametrize(
    ("args", "reason"), [(a, r) for _, a, r in MALFORMED], ids=[n for n, _, _ in MALFORMED]
)
def test_malformed_args_map_to_one_unmapped_naming_the_malformation(
    args: object, reason: str
) -> None:
    assert _reason(args) == reason


@pytest.mark.parametrize(
    ("args", "reason"), [(a, r) for _, a, r in MALFORMED], ids=[n for n, _, _ in MALFORMED]
)
def test_malformed_start_is_counted_by_the_event_mapper(args: object, reason: str) -> None:
    mapper = EventMapper()
    event = {"type": START_EVENT, "toolName": "ask", "toolCallId": "call-1", "args": args}

    assert mapper.map(event) == [Unmapped(f"{START_EVENT}:ask", reason)]
    assert mapper.unmapped_count == 1


def test_one_bad_question_bounces_the_whole_ask() -> None:
    args = copy.deepcopy(TWO_QUESTIONS)
    args["questions"].append({"id": "third", "question": "?", "options": [{"label": 5}]})
    assert _reason(args) == "questions[2].options[0].label is not a string"


# Runtime objects that are not plain JSON: a dict subclass could answer for a
# key it does not hold, much as an inherited property would in JavaScript.
class _Fabricating(dict[str, Any]):
    def __missing__(self, key: str) -> object:
        return TWO_QUESTIONS["questions"]

    def get(self, key: str, default: object = None) -> object:
        return TWO_QUESTIONS["questions"]


class _LyingList(list[Any]):
    def __iter__(self) -> Any:
        return iter(TWO_QUESTIONS["questions"])

    def __len__(self) -> int:
        return 2


class _Text(str):
    __slots__ = ()


POLLUTED: list[tuple[str, object, str]] = [
    ("dict subclass answering for a missing key", _Fabricating(), "args is not an object"),
    (
        "dict subclass with real content",
        _Fabricating(copy.deepcopy(TWO_QUESTIONS)),
        "args is not an object",
    ),
    ("list subclass", {"questions": _LyingList()}, "questions is not a list"),
    ("str subclass id", _with(id=_Text("db")), "questions[0].id is not a string"),
    (
        "dict subclass question",
        {"questions": [_Fabricating(TWO_QUESTIONS["questions"][0])]},
        "questions[0] is not an object",
    ),
    ("key with the wrong type", _with(id=["db"]), "questions[0].id is not a string"),
    (
        "options an object of options",
        _with(options={"0": {"label": "a"}}),
        "questions[0].options is not a list",
    ),
]


@pytest.mark.parametrize(
    ("args", "reason"), [(a, r) for _, a, r in POLLUTED], ids=[n for n, _, _ in POLLUTED]
)
def test_non_json_lookalikes_are_malformed(args: object, reason: str) -> None:
    assert _reason(args) == reason


# --- the event mapper ---------------------------------------------------------


def _start(args: object, tool: str = "ask", call_id: object = "call-1") -> dict[str, object]:
    return {"type": START_EVENT, "toolName": tool, "toolCallId": call_id, "args": args}


def _end(*, is_error: object, tool: str = "ask") -> dict[str, object]:
    return {"type": END_EVENT, "toolName": tool, "toolCallId": "call-1", "isError": is_error}


def test_well_formed_start_yields_the_mapped_ask_with_its_call_id() -> None:
    mapper = EventMapper()
    assert mapper.map(_start(TWO_QUESTIONS)) == [MappedAsk(_mapped(TWO_QUESTIONS), "call-1")]
    assert mapper.unmapped_count == 0


def test_non_string_call_id_is_dropped_not_trusted() -> None:
    (output,) = EventMapper().map(_start(TWO_QUESTIONS, call_id=7))
    assert output == MappedAsk(_mapped(TWO_QUESTIONS), "")


def test_failed_end_yields_a_counted_unmapped() -> None:
    mapper = EventMapper()
    (output,) = mapper.map(_end(is_error=True))
    assert isinstance(output, Unmapped)
    assert output.event_type == f"{END_EVENT}:ask"
    assert output.reason
    assert mapper.unmapped_count == 1


def test_start_then_failed_end_yields_the_ask_and_the_counted_failure() -> None:
    mapper = EventMapper()
    outputs = [*mapper.map(_start(TWO_QUESTIONS)), *mapper.map(_end(is_error=True))]
    assert [type(o) for o in outputs] == [MappedAsk, Unmapped]
    assert mapper.unmapped_count == 1


@pytest.mark.parametrize("is_error", [False, None, "true", 1])
def test_successful_end_yields_nothing(is_error: object) -> None:
    mapper = EventMapper()
    assert mapper.map(_end(is_error=is_error)) == []
    assert mapper.unmapped_count == 0


def test_counts_accumulate_across_events() -> None:
    mapper = EventMapper()
    mapper.map(_start({}))
    mapper.map(_start(TWO_QUESTIONS))
    mapper.map(_end(is_error=True))
    mapper.map(_start({"questions": []}))
    assert mapper.unmapped_count == 3


@pytest.mark.parametrize(
    "event",
    [
        _start({}, tool="bash"),
        _end(is_error=True, tool="bash"),
        {"type": "message_start"},
        {"type": "tool_execution_update", "toolName": "ask", "args": {}},
        {"toolName": "ask", "args": {}},
        {"type": START_EVENT, "args": {}},
        None,
        "tool_execution_start",
        [],
    ],
)
def test_other_events_yield_nothing(event: object) -> None:
    mapper = EventMapper()
    assert mapper.map(event) == []
    assert mapper.unmapped_count == 0


# --- the coding agents' question-tool shape -------------------------------------

# What coding agents' own question tool takes: no ids, multiSelect, no recommendation.
CODING_AGENT: dict[str, Any] = {
    "questions": [
        {
            "question": "Which database should the service use?",
            "header": "Storage",
            "options": [
                {"label": "PostgreSQL", "description": "Relational, already deployed"},
                {"label": "SQLite", "description": "One file"},
            ],
            "multiSelect": False,
        },
        {
            "question": "Which features ship first?",
            "header": "Scope",
            "options": [{"label": "Search"}, {"label": "Export"}],
            "multiSelect": True,
        },
    ]
}


def test_the_coding_agent_shape_maps_to_one_ask_numbered_by_position() -> None:
    mapped = map_coding_agent_ask(CODING_AGENT)
    assert isinstance(mapped, MappedAsk), mapped
    db, features = mapped.ask.questions
    assert (db.question_id, db.header, db.allow_multiple, db.HasField("recommended")) == (
        "1",
        "Storage",
        False,
        False,
    )
    assert [(o.id, o.label, o.description) for o in db.options] == [
        ("0", "PostgreSQL", "Relational, already deployed"),
        ("1", "SQLite", "One file"),
    ]
    assert (features.question_id, features.allow_multiple) == ("2", True)
    assert [o.label for o in features.options] == ["Search", "Export"]
    assert not mapped.ask.ask_id and not mapped.ask.answered


def test_the_coding_agent_shape_reads_its_own_keys_not_the_runtimes() -> None:
    args = copy.deepcopy(CODING_AGENT)
    del args["questions"][1]["multiSelect"]
    args["questions"][1]["multi"] = True  # the runtime's key means nothing here
    args["questions"][0]["id"] = "db"
    mapped = map_coding_agent_ask(args)
    assert isinstance(mapped, MappedAsk), mapped
    assert [q.question_id for q in mapped.ask.questions] == ["1", "2"]
    assert not mapped.ask.questions[1].allow_multiple


@pytest.mark.parametrize(
    ("change", "reason"),
    [
        ({"multiSelect": "yes"}, "questions[0].multiSelect is not a boolean"),
        ({"question": None}, "questions[0].question is not a string"),
        ({"options": "a,b"}, "questions[0].options is not a list"),
    ],
)
def test_a_malformed_coding_agent_ask_maps_to_one_unmapped(
    change: dict[str, Any], reason: str
) -> None:
    args = copy.deepcopy(CODING_AGENT)
    args["questions"][0].update(change)
    result = map_coding_agent_ask(args)
    assert isinstance(result, Unmapped) and result.reason == reason
    empty = map_coding_agent_ask({"questions": []})
    assert empty == Unmapped(result.event_type, "questions is empty")


# --- the runtime's timeout --------------------------------------------------------


def test_the_runtimes_timeout_becomes_the_asks_deadline() -> None:
    """The runtime times its ask tool out after its `ask.timeout` setting
    (seconds; 0 is none): the ask carries that as its timeout, which the
    server turns into a deadline."""
    result = map_native_ask(TWO_QUESTIONS, timeout_seconds=90)
    assert isinstance(result, MappedAsk)
    assert result.ask.HasField("timeout") and not result.ask.HasField("deadline")
    assert result.ask.timeout.ToTimedelta() == datetime.timedelta(seconds=90)
    half = map_native_ask(TWO_QUESTIONS, timeout_seconds=1.5)
    assert isinstance(half, MappedAsk)
    assert half.ask.timeout.ToTimedelta() == datetime.timedelta(seconds=1.5)
    for none in (None, 0):
        untimed = map_native_ask(TWO_QUESTIONS, timeout_seconds=none)
        assert isinstance(untimed, MappedAsk) and not untimed.ask.HasField("timeout")
    # The coding agents' question tool has no timeout of its own to carry.
    coding = map_coding_agent_ask({"questions": [{"question": "Go?", "options": []}]})
    assert isinstance(coding, MappedAsk) and not coding.ask.HasField("timeout")


def test_the_event_mapper_carries_the_runtimes_timeout_on_every_ask() -> None:
    mapper = EventMapper(ask_timeout_seconds=300)
    (output,) = mapper.map(_start(TWO_QUESTIONS))
    assert isinstance(output, MappedAsk) and output.tool_call_id == "call-1"
    assert output.ask.timeout.ToTimedelta() == datetime.timedelta(minutes=5)
    (plain,) = EventMapper().map(_start(TWO_QUESTIONS))
    assert isinstance(plain, MappedAsk) and not plain.ask.HasField("timeout")
    for bad in (-1, math.inf, math.nan):
        with pytest.raises(ValueError, match="ask_timeout_seconds"):
            EventMapper(ask_timeout_seconds=bad)


def test_an_expired_ask_comes_back_timed_out_with_nothing_chosen() -> None:
    """Where the runtime would pick the recommended option at its timeout,
    Compass picks nothing for a person: every question reads timed out."""
    ask = _mapped(TWO_QUESTIONS)
    ask.ending.kind = comms_pb2.ASK_ENDING_KIND_EXPIRED
    for question in ask.questions:
        question.timed_out = True
    assert answers_from_ask(ask) == [
        QuestionResult("db", [], None, True),
        QuestionResult("features", [], None, True),
    ]


# --- the way back ---------------------------------------------------------------


def test_answers_from_ask_reconstruct_labels_and_free_text() -> None:
    ask = _mapped(TWO_QUESTIONS)
    ask.ask_id = "ask-1"
    ask.answered = True
    first, second = ask.questions
    first.chosen_option_ids.append("1")
    second.chosen_option_ids.extend(["0", "2"])
    second.custom_text = "and audit logs"

    assert answers_from_ask(ask) == [
        QuestionResult("db", ["SQLite"], None, False),
        QuestionResult("features", ["Search", "Sharing"], "and audit logs", False),
    ]


def test_answers_from_an_answer_block_and_a_timeout() -> None:
    block = comms_pb2.AskAnswerBlock(
        ask_id="ask-1",
        questions=[
            comms_pb2.AskQuestion(
                question_id="why",
                question="Why?",
                custom_text="the disk filled up",
            ),
            comms_pb2.AskQuestion(
                question_id="go",
                question="Go?",
                options=[comms_pb2.AskOption(id="0", label="Yes")],
                chosen_option_ids=["0"],
                timed_out=True,
            ),
        ],
    )
    assert answers_from_ask(block) == [
        QuestionResult("why", [], "the disk filled up", False),
        QuestionResult("go", ["Yes"], None, True),
    ]


def test_a_skip_comes_back_as_no_selection_and_no_text() -> None:
    ask = _mapped(TWO_QUESTIONS)
    assert answers_from_ask(ask) == [
        QuestionResult("db", [], None, False),
        QuestionResult("features", [], None, False),
    ]


def test_an_unknown_option_id_yields_no_label() -> None:
    ask = _mapped(TWO_QUESTIONS)
    ask.questions[0].chosen_option_ids.extend(["9", "0"])
    assert answers_from_ask(ask)[0].selected_options == ["PostgreSQL"]


# --- properties -----------------------------------------------------------------

FIELD_NAMES = ["questions", "id", "question", "header", "options", "label", "description"]
KEYS = st.sampled_from([*FIELD_NAMES, "preview", "multi", "recommended", "x"]) | st.text(max_size=4)


def _containers(inner: st.SearchStrategy[object]) -> st.SearchStrategy[object]:
    return st.one_of(st.lists(inner, max_size=4), st.dictionaries(KEYS, inner, max_size=6))


JSON = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats()
    | st.text(max_size=8)
    | st.sampled_from(["", "ask", "db", "label", "0"]),
    _containers,
    max_leaves=30,
)

OPTION = st.fixed_dictionaries(
    {"label": st.text()},
    optional={"description": st.text(), "preview": st.text()},
)
QUESTION = st.fixed_dictionaries(
    {"id": st.text(min_size=1), "question": st.text(), "options": st.lists(OPTION, max_size=4)},
    optional={
        "header": st.text(),
        "multi": st.booleans(),
        "recommended": st.integers(-(2**31), 2**31 - 1),
    },
)
WELL_FORMED = st.lists(QUESTION, min_size=1, max_size=5, unique_by=lambda q: q["id"]).map(
    lambda questions: {"questions": questions}
)


def _check_output(result: MappedAsk | Unmapped) -> None:
    if isinstance(result, Unmapped):
        assert result.event_type == f"{START_EVENT}:ask"
        assert result.reason
        return
    assert isinstance(result, MappedAsk)
    ask = result.ask
    ids = [q.question_id for q in ask.questions]
    assert ids and all(ids) and len(set(ids)) == len(ids)
    assert ask.ask_id == "" and not ask.answered and not ask.cancelled
    for question in ask.questions:
        assert [o.id for o in question.options] == [str(i) for i in range(len(question.options))]
        assert not question.chosen_option_ids and not question.custom_text
    assert comms_pb2.Ask.FromString(ask.SerializeToString()) == ask


@settings(max_examples=200, deadline=None)
@given(JSON)
def test_any_json_like_input_maps_or_is_unmapped(args: object) -> None:
    _check_output(map_native_ask(args))


@settings(max_examples=200, deadline=None)
@given(st.fixed_dictionaries({"questions": st.lists(JSON | QUESTION, min_size=1, max_size=3)}))
def test_near_valid_input_maps_or_is_unmapped(args: object) -> None:
    _check_output(map_native_ask(args))


@settings(max_examples=200, deadline=None)
@given(WELL_FORMED)
def test_well_formed_input_maps_field_for_field(args: dict[str, Any]) -> None:
    result = map_native_ask(args)
    _check_output(result)
    assert isinstance(result, MappedAsk)
    for source, question in zip(args["questions"], result.ask.questions, strict=True):
        assert question.question_id == source["id"]
        assert question.question == source["question"]
        assert question.header == source.get("header", "")
        assert question.allow_multiple == source.get("multi", False)
        assert question.HasField("recommended") == ("recommended" in source)
        assert question.recommended == source.get("recommended", 0)
        assert [(o.label, o.description, o.preview) for o in question.options] == [
            (o["label"], o.get("description", ""), o.get("preview", "")) for o in source["options"]
        ]


@settings(max_examples=100, deadline=None)
@given(WELL_FORMED, st.data())
def test_a_repeated_id_always_bounces_the_ask(args: dict[str, Any], data: st.DataObject) -> None:
    questions = args["questions"]
    twin = dict(data.draw(st.sampled_from(questions)))
    questions.insert(data.draw(st.integers(0, len(questions))), twin)
    result = map_native_ask(args)
    assert isinstance(result, Unmapped)
    assert "repeats" in result.reason
