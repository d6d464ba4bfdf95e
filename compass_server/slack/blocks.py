"""An ask as an interactive Slack message, its ending in place of it, and
the modals that answer or decline it — built with Slack's own Block Kit
models, each validated before it is sent.

A single-select question with a few options is a button per option, plus
"Other…" and "Decline…"; anything else is an "Answer" button that opens a
modal with one input per question (radio buttons or checkboxes, or a menu
past ten options, and an optional "Other" text). Texts are escaped and cut
as the one-way cards' are (webhooks/slack.py).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from slack_sdk.models.blocks import (
    ActionsBlock,
    Block,
    ButtonElement,
    CheckboxesElement,
    ContextBlock,
    InputBlock,
    MarkdownTextObject,
    Option,
    PlainTextInputElement,
    PlainTextObject,
    RadioButtonsElement,
    SectionBlock,
    StaticMultiSelectElement,
    StaticSelectElement,
)
from slack_sdk.models.views import View

from compass_server.store.types import Answer
from compass_server.webhooks import slack as cards

# A question answered by buttons: single-select with at most this many options.
MAX_BUTTONS = 5
# Radio buttons and checkboxes take ten options; a menu takes a hundred.
MAX_CHOICES = 10
MAX_MENU = 100
OPTION_CHARS = 75
TITLE_CHARS = 24
LABEL_CHARS = 2_000
# Free text a modal takes per question, and a decline's reason.
TEXT_CHARS = 3_000
REASON_CHARS = 500
METADATA_CHARS = 3_000

CHOOSE = "compass-choose"
OTHER = "compass-other"
ANSWER = "compass-answer"
DECLINE = "compass-decline"
OPEN = "compass-open"
ANSWER_VIEW = "compass-answer"
DECLINE_VIEW = "compass-decline"


def _checked(blocks: Sequence[Block]) -> list[dict[str, Any]]:
    out = []
    for b in blocks:
        b.validate_json()
        out.append(b.to_dict())
    return out


def _md(text: str) -> MarkdownTextObject:
    return MarkdownTextObject(text=cards._cut(text, cards.SECTION_CHARS))


def _plain(text: str, most: int = OPTION_CHARS) -> PlainTextObject:
    return PlainTextObject(text=cards._cut(text or " ", most), emoji=False)


def _value(ask_id: str, option: str = "") -> str:
    return json.dumps({"a": ask_id, "o": option}, separators=(",", ":"))


def read_value(value: str) -> tuple[str, str]:
    """(ask_id, option_id) of a button's value; ValueError when it isn't one of ours."""
    try:
        data = json.loads(value)
    except RecursionError:
        raise ValueError(value) from None
    if not isinstance(data, dict) or not isinstance(data.get("a"), str):
        raise ValueError(value)
    option = data.get("o", "")
    return data["a"], option if isinstance(option, str) else ""


def buttons_fit(ask: Mapping[str, Any]) -> bool:
    """One single-select question with a few options: answered by a click."""
    questions = ask["questions"]
    if len(questions) != 1 or ask.get("quorum"):
        return False
    q = questions[0]
    return not q["allow_multiple"] and 0 < len(q["options"]) <= MAX_BUTTONS


def open_message(data: Mapping[str, Any]) -> dict[str, Any]:
    """The ask as posted: the card's text, and buttons that answer it."""
    card = cards._card(dict(data), data.get("asker"), "Open in Compass")
    ask = data["ask"]
    ask_id = ask["ask_id"]
    head = [
        SectionBlock(text=_md(b["text"]["text"])) for b in card["blocks"] if b["type"] == "section"
    ]
    elements: list[ButtonElement] = []
    if buttons_fit(ask):
        q = ask["questions"][0]
        for i, o in enumerate(q["options"]):
            elements.append(
                ButtonElement(
                    text=_plain(o["label"]),
                    action_id=f"{CHOOSE}-{i}",
                    value=_value(ask_id, o["id"]),
                    style="primary" if q["recommended"] == i else None,
                )
            )
        elements.append(ButtonElement(text=_plain("Other…"), action_id=OTHER, value=_value(ask_id)))
    else:
        elements.append(
            ButtonElement(
                text=_plain("Answer"), action_id=ANSWER, value=_value(ask_id), style="primary"
            )
        )
    elements.append(ButtonElement(text=_plain("Decline…"), action_id=DECLINE, value=_value(ask_id)))
    elements.append(ButtonElement(text=_plain("Open in Compass"), action_id=OPEN, url=ask["url"]))
    blocks: list[Block] = [
        *head,
        ActionsBlock(block_id=f"ask:{ask_id}"[:255], elements=elements),
        ContextBlock(elements=[_md(f"Ask `{cards._escape(ask_id)}` · Compass")]),
    ]
    return {"text": card["text"], "blocks": _checked(blocks)}


_STEPS = {
    "reminded": ("Reminder: ", "Reminder: this ask is still waiting for your answer."),
    "escalated": ("Urgent: ", "Urgent: nobody has answered this ask yet; it was passed to you."),
}


def direct_message(data: Mapping[str, Any], step: str = "") -> dict[str, Any]:
    """The ask as a direct message: the channel message's text and buttons,
    led for a reminder or an escalation by what it is."""
    message = open_message(data)
    said = _STEPS.get(step)
    if said is None:
        return message
    lead = ContextBlock(elements=[_md(said[1])])
    lead.validate_json()
    text = cards._cut(said[0] + message["text"], cards.FALLBACK_CHARS)
    return {"text": text, "blocks": [lead.to_dict(), *message["blocks"]]}


def ended_message(data: Mapping[str, Any]) -> dict[str, Any]:
    """The ask once ended: what it asked and how it ended, no buttons."""
    card = cards._card(dict(data), data.get("asker"), "Open in Compass")
    follow = cards._follow_up(dict(data))
    heads = [b["text"]["text"] for b in card["blocks"] if b["type"] == "section"][:1]
    blocks: list[Block] = [SectionBlock(text=_md(t)) for t in heads]
    blocks += [SectionBlock(text=_md(b["text"]["text"])) for b in follow["blocks"][:1]]
    blocks.append(ContextBlock(elements=[_md(follow["blocks"][1]["elements"][0]["text"])]))
    return {"text": follow["text"], "blocks": _checked(blocks)}


def _options(q: Mapping[str, Any]) -> list[Option]:
    out = []
    for i, o in enumerate(q["options"][:MAX_MENU]):
        label = o["label"] + (" (recommended)" if q["recommended"] == i else "")
        description = _plain(o["description"]) if o["description"] else None
        out.append(Option(value=o["id"], text=_plain(label), description=description))
    return out


def _choice(q: Mapping[str, Any], chosen: str = "") -> Any:
    options = _options(q)
    initial = [o for o in options if o.value == chosen] if chosen else []
    many = len(options) > MAX_CHOICES
    if q["allow_multiple"]:
        if many:
            return StaticMultiSelectElement(action_id="choice", options=options)
        return CheckboxesElement(
            action_id="choice", options=options, initial_options=initial or None
        )
    if many:
        return StaticSelectElement(action_id="choice", options=options)
    return RadioButtonsElement(
        action_id="choice", options=options, initial_option=initial[0] if initial else None
    )


def answer_view(
    ask: Mapping[str, Any], where: Mapping[str, str], chosen: str = ""
) -> dict[str, Any]:
    """The modal that answers the ask: an input per question, submitted as one answer."""
    blocks: list[Block] = []
    for i, q in enumerate(ask["questions"][: cards.MAX_QUESTIONS]):
        head = f"{q['header']} · " if q["header"] else ""
        label = _plain(head + q["question"], LABEL_CHARS)
        if q["options"]:
            blocks.append(
                InputBlock(block_id=f"q{i}", label=label, element=_choice(q, chosen), optional=True)
            )
        text_label = _plain(
            "Other (in your own words)" if q["options"] else head + q["question"], LABEL_CHARS
        )
        blocks.append(
            InputBlock(
                block_id=f"t{i}",
                label=text_label,
                element=PlainTextInputElement(
                    action_id="text", multiline=True, max_length=TEXT_CHARS
                ),
                optional=True,
            )
        )
    metadata = json.dumps({"a": ask["ask_id"], **where}, separators=(",", ":"))
    view = View(
        type="modal",
        callback_id=ANSWER_VIEW,
        title=_plain("Answer", TITLE_CHARS),
        submit=_plain("Send", TITLE_CHARS),
        close=_plain("Cancel", TITLE_CHARS),
        blocks=blocks,
        private_metadata=metadata[:METADATA_CHARS],
    )
    view.validate_json()
    return view.to_dict()


def decline_view(ask_id: str, question: str, where: Mapping[str, str]) -> dict[str, Any]:
    blocks: list[Block] = [
        SectionBlock(text=_md(f"Decline _{cards._escape(cards._cut(question, 300))}_?")),
        InputBlock(
            block_id="reason",
            label=_plain("Why (the agent hears it)", LABEL_CHARS),
            element=PlainTextInputElement(
                action_id="text", multiline=True, max_length=REASON_CHARS
            ),
            optional=True,
        ),
    ]
    view = View(
        type="modal",
        callback_id=DECLINE_VIEW,
        title=_plain("Decline", TITLE_CHARS),
        submit=_plain("Decline", TITLE_CHARS),
        close=_plain("Cancel", TITLE_CHARS),
        blocks=blocks,
        private_metadata=json.dumps({"a": ask_id, **where}, separators=(",", ":")),
    )
    view.validate_json()
    return view.to_dict()


def typed(state: Mapping[str, Any], block: str) -> str:
    """What was typed in a modal's text input (its block's `text` action)."""
    value = state.get(block, {}).get("text", {}).get("value")
    return value if isinstance(value, str) else ""


def answers_of(questions: Sequence[Any], state: Mapping[str, Any]) -> list[Answer]:
    """A modal's inputs (their shape checked by the caller) as one answer:
    each question's choices and text."""
    out = []
    for i, q in enumerate(questions):
        chosen: list[str] = []
        picked = state.get(f"q{i}", {}).get("choice", {})
        if picked.get("selected_option"):
            chosen.append(str(picked["selected_option"].get("value", "")))
        for o in picked.get("selected_options") or []:
            chosen.append(str(o.get("value", "")))
        out.append(Answer(q.question_id, tuple(chosen), typed(state, f"t{i}")))
    return out


def said(text: str) -> str:
    """Text for an ephemeral message, escaped."""
    return cards._escape(text)
