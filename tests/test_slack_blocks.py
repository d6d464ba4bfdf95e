"""Every ask the store accepts makes Slack messages and forms that Slack's
own Block Kit models accept unchanged — at the store's largest (20
questions, 50 options, 2,000-character questions, markup in every text) —
and a form's inputs map back to one answer per question."""

from __future__ import annotations

import string
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st
from slack_sdk.models.views import View

from compass_server.slack import blocks
from compass_server.store import blocks as rules
from compass_server.store.types import Ask, AskOption, AskQuestion
from compass_server.webhooks.payloads import ask_data
from tests.slack_standin import buttons, checked_message, texts

text = st.text(alphabet=string.ascii_letters + " <>&*_~`|é🙂\n", max_size=60)
ident = st.text(alphabet=string.ascii_letters + string.digits + "-_", min_size=1, max_size=12)


def longest(n: int) -> str:
    return ("<b>&" * n)[:n]


@st.composite
def asks(draw: Any) -> Ask:
    n = draw(st.integers(1, 4))
    questions = []
    for i in range(n):
        k = draw(st.integers(0, 14))
        ids = draw(st.lists(ident, min_size=k, max_size=k, unique=True))
        options = tuple(AskOption(o, draw(text) or o, draw(text)) for o in ids)
        questions.append(
            AskQuestion(
                question_id=f"q{i}",
                question=draw(text) or "?",
                header=draw(text),
                options=options,
                allow_multiple=draw(st.booleans()) and bool(options),
                recommended=draw(st.integers(0, len(options) - 1)) if options else None,
            )
        )
    return Ask(ask_id="ask_" + draw(ident), questions=tuple(questions))


def data(ask: Ask, state: str = "open", ending: dict[str, Any] | None = None) -> dict[str, Any]:
    return {
        "channel": {"channel_id": "c", "name": "gen<e>ral", "kind": "channel"},
        "asker": {"account_id": "a", "handle": "sc&out"},
        "ask": ask_data(ask, state, "https://compass.example.test/#/ask/x", ending),
    }


def checked_view(view: dict[str, Any]) -> dict[str, Any]:
    parsed = View(**view)
    parsed.validate_json()
    assert parsed.to_dict() == view
    assert len(view["blocks"]) <= 100
    return view


@settings(max_examples=60, deadline=None)
@given(asks())
def test_every_ask_is_a_valid_message_a_valid_form_and_a_valid_ending(ask: Ask) -> None:
    posted = checked_message(blocks.open_message(data(ask)))
    shown = buttons(posted)
    if blocks.buttons_fit(data(ask)["ask"]):
        labels = [b["text"]["text"] for b in shown]
        assert labels[-3:] == ["Other…", "Decline…", "Open in Compass"]
        assert len(labels) == len(ask.questions[0].options) + 3
    else:
        assert [b["text"]["text"] for b in shown] == ["Answer", "Decline…", "Open in Compass"]
    for b in shown[:-1]:
        assert blocks.read_value(b["value"])[0] == ask.ask_id
    view = checked_view(blocks.answer_view(data(ask)["ask"], {"c": "C1"}))
    inputs = [b["block_id"] for b in view["blocks"]]
    for i, q in enumerate(ask.questions):
        assert f"t{i}" in inputs and (f"q{i}" in inputs) is bool(q.options)
    checked_view(blocks.decline_view(ask.ask_id, ask.questions[0].question, {"c": "C1"}))
    ended = {"kind": "declined", "by": {"handle": "a<d>a"}, "reason": "no & <never>"}
    closed = checked_message(blocks.ended_message(data(ask, "declined", ended)))
    assert buttons(closed) == []
    assert texts(closed)[1] == "*Declined by a&lt;d&gt;a: no &amp; &lt;never&gt;*"


def test_the_largest_ask_the_store_takes_fits_slack() -> None:
    options = tuple(
        AskOption(f"{i:0>128}", longest(rules.MAX_LABEL_CHARS), longest(2_000))
        for i in range(rules.MAX_OPTIONS)
    )
    ask = Ask(
        ask_id="ask_big",
        questions=tuple(
            AskQuestion(
                question_id=f"q{i}",
                question=longest(rules.MAX_QUESTION_CHARS),
                header=longest(rules.MAX_HEADER_CHARS),
                options=options,
                allow_multiple=i % 2 == 1,
                recommended=3,
            )
            for i in range(rules.MAX_QUESTIONS)
        ),
    )
    checked_message(blocks.open_message(data(ask)))
    view = checked_view(blocks.answer_view(data(ask)["ask"], {"c": "C1"}))
    kinds = {b["element"]["type"] for b in view["blocks"]}
    # Past ten options a question is a menu.
    assert kinds == {"static_select", "multi_static_select", "plain_text_input"}
    answered = {
        "ask": {**data(ask)["ask"], "state": "answered"},
        "channel": data(ask)["channel"],
        "asker": data(ask)["asker"],
    }
    answered["ask"]["ending"] = {"kind": "answered", "by": {"handle": "ada"}, "reason": ""}
    checked_message(blocks.ended_message(answered))


def test_a_forms_inputs_are_one_answer_per_question() -> None:
    ask = Ask(
        ask_id="ask_1",
        questions=(
            AskQuestion("db", "Which?", options=(AskOption("pg", "PG"), AskOption("my", "My"))),
            AskQuestion(
                "langs",
                "Which?",
                options=(AskOption("py", "Py"), AskOption("go", "Go")),
                allow_multiple=True,
            ),
            AskQuestion("why", "Why?"),
        ),
    )
    state = {
        "q0": {"choice": {"selected_option": {"value": "pg"}}},
        "q1": {"choice": {"selected_options": [{"value": "py"}, {"value": "go"}]}},
        "t2": {"text": {"value": "because"}},
    }
    got = blocks.answers_of(ask.questions, state)
    assert [(a.question_id, a.chosen_option_ids, a.custom_text) for a in got] == [
        ("db", ("pg",), ""),
        ("langs", ("py", "go"), ""),
        ("why", (), "because"),
    ]
    # Nothing chosen and nothing written is an accepted skip.
    assert [a.chosen_option_ids for a in blocks.answers_of(ask.questions, {})] == [(), (), ()]
