"""A notice as a Slack incoming-webhook message (Block Kit).

A posted ask (or an inbox item that opens) is a card: who asks where, each
question with its options, and a button that opens the ask on the page. A
vote in a quorum ask is a follow-up ("ada answered: 1 of 2"), and when the
ask ends, a follow-up says how: "Answered by ada" (with the answers; a
quorum's by each person), "Withdrawn by scout", "Declined by ada: …",
"Expired". An incoming webhook
can't edit the card it posted, so the follow-up names the ask's first
question to tie the two together. Texts are cut to Block Kit's limits
(3,000 characters a section, 150 a header, 50 blocks a message).
"""

from __future__ import annotations

import datetime
from typing import Any

from compass_server.store.types import WebhookEventType

T = WebhookEventType

SECTION_CHARS = 3_000
BUTTON_CHARS = 75
# The text a notification shows; the blocks carry the rest.
FALLBACK_CHARS = 300
# A card's questions: with its other blocks, well under 50 blocks.
MAX_QUESTIONS = 20
MAX_OPTIONS_SHOWN = 10


def _escape(text: str) -> str:
    """Slack's mrkdwn takes &, < and > as markup: escaped, they show as typed."""
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def _cut(text: str, most: int) -> str:
    return text if len(text) <= most else text[: most - 1] + "…"


def _section(text: str) -> dict[str, Any]:
    return {"type": "section", "text": {"type": "mrkdwn", "text": _cut(text, SECTION_CHARS)}}


def _context(text: str) -> dict[str, Any]:
    return {"type": "context", "elements": [{"type": "mrkdwn", "text": _cut(text, SECTION_CHARS)}]}


def _button(label: str, url: str) -> dict[str, Any]:
    return {
        "type": "actions",
        "elements": [
            {
                "type": "button",
                "text": {"type": "plain_text", "text": _cut(label, BUTTON_CHARS)},
                "url": url,
                "style": "primary",
                "action_id": "compass-open",
            }
        ],
    }


def _date(iso: str | None) -> str:
    """A time Slack shows in the reader's own zone (its text is the fallback)."""
    if not iso:
        return ""
    at = datetime.datetime.fromisoformat(iso.replace("Z", "+00:00"))
    return f"<!date^{int(at.timestamp())}^{{date_short_pretty}} at {{time}}|{iso}>"


def _question(q: dict[str, Any]) -> str:
    head = f"*{_escape(q['header'])}* · " if q["header"] else ""
    lines = [head + _escape(q["question"])]
    options = q["options"]
    for i, o in enumerate(options[:MAX_OPTIONS_SHOWN]):
        mark = " _(recommended)_" if q["recommended"] == i else ""
        lines.append(f"• {_escape(o['label'])}{mark}")
        if o["description"]:
            lines.append(f"    {_escape(_cut(o['description'], 200))}")
    if len(options) > MAX_OPTIONS_SHOWN:
        lines.append(f"_…and {len(options) - MAX_OPTIONS_SHOWN} more_")
    if q["allow_multiple"]:
        lines.append("_Choose any that apply._")
    elif not options:
        lines.append("_Answer in your own words._")
    return "\n".join(lines)


def _answer(q: dict[str, Any]) -> str:
    return _said(q, q.get("answer") or {})


def _said(q: dict[str, Any], answer: dict[str, Any]) -> str:
    parts = [_escape(label) for label in answer.get("chosen_labels", [])]
    if answer.get("custom_text"):
        parts.append(f"“{_escape(_cut(answer['custom_text'], 500))}”")
    return f"{_escape(_cut(q['question'], 300))} → {', '.join(parts) or '_skipped_'}"


def _votes(ask: dict[str, Any]) -> list[str]:
    """A quorum's answers, each person's on one line."""
    questions = {q["question_id"]: q for q in ask["questions"]}
    lines = []
    for vote in ask["quorum"]["votes"]:
        if vote["kind"] != "answer":
            continue
        said = "; ".join(
            _said(questions.get(a["question_id"], {"question": a["question_id"]}), a)
            for a in vote["answers"]
        )
        lines.append(f"*{_handle(vote['by'])}*: {said}")
    return lines


def _handle(who: dict[str, Any] | None) -> str:
    return _escape(who["handle"]) if who and who.get("handle") else "someone"


def _where(data: dict[str, Any]) -> str:
    channel = data.get("channel")
    if channel is None:
        return f"{_handle(data.get('agent'))}'s inbox"
    if channel["kind"] == "dm":
        return "a direct message"
    return f"#{_escape(channel['name'])}"


def _card(data: dict[str, Any], asker: dict[str, Any] | None, button: str) -> dict[str, Any]:
    ask = data["ask"]
    item = data.get("item")
    if item is not None:
        head = f"*{_handle(asker)}* asks in its inbox: *{_escape(item['title'])}*"
    else:
        head = f"*{_handle(asker)}* asks in *{_where(data)}*"
    if ask["answerers"]:
        names = ", ".join(_escape(a["handle"]) for a in ask["answerers"])
        quorum = ask.get("quorum")
        if quorum:
            against = quorum["declines_count_against"]
            head += f"\nNeeds {quorum['required']} answers of {names}; " + (
                "a decline counts against that." if against else "a decline ends it."
            )
        else:
            head += f"\nOnly {names} may answer."
    if ask["deadline"]:
        head += f"\nIt expires {_date(ask['deadline'])} unless someone answers."
    questions = ask["questions"]
    blocks = [_section(head)]
    blocks += [_section(_question(q)) for q in questions[:MAX_QUESTIONS]]
    blocks.append(_button(button, ask["url"]))
    blocks.append(_context(f"Ask `{_escape(ask['ask_id'])}` · Compass"))
    first = questions[0]["question"] if questions else ""
    fallback = f"{_handle(asker)} asks in {_where(data)}: {_escape(first)}"
    return {"text": _cut(fallback, FALLBACK_CHARS), "blocks": blocks}


def _how_it_ended(ask: dict[str, Any], data: dict[str, Any]) -> str:
    ending = ask["ending"] or {"kind": ask["state"], "by": None, "reason": ""}
    kind, by, reason = ending["kind"], _handle(ending["by"]), ending.get("reason") or ""
    if kind == "answered" and ending.get("standing_answer_id"):
        return f"Answered by {by}'s standing answer"
    if kind == "answered" and ask.get("quorum"):
        quorum = ask["quorum"]
        names = [_handle(v["by"]) for v in quorum["votes"] if v["kind"] == "answer"]
        return f"Answered by {', '.join(names)} ({quorum['answered']} of {quorum['required']})"
    if kind == "answered":
        return f"Answered by {by}"
    if kind == "declined":
        return f"Declined by {by}: {_escape(reason)}" if reason else f"Declined by {by}"
    if kind == "withdrawn_by_agent":
        return f"Withdrawn by {by}: {_escape(reason)}" if reason else f"Withdrawn by {by}"
    if kind == "withdrawn_by_owner":
        return f"Withdrawn by {by}, the owner of {_handle(data.get('asker'))}"
    if kind == "withdrawn_by_person":
        return f"Closed by {by}"
    return "Expired"


def _follow_up(data: dict[str, Any]) -> dict[str, Any]:
    ask = data["ask"]
    if ask is None:  # an inbox item whose ask is gone: say what happened to it
        said = f"{data['item']['status'].capitalize()}: {_escape(data['item']['title'])}"
        return {"text": _cut(said, FALLBACK_CHARS), "blocks": [_section(said)]}
    ended = _how_it_ended(ask, data)
    lines = [f"*{ended}*"]
    if ask["state"] == "answered" and ask.get("quorum"):
        lines += _votes(ask)
    elif ask["state"] == "answered":
        lines += [_answer(q) for q in ask["questions"][:MAX_QUESTIONS]]
    elif ask["state"] == "expired" and ask["deadline"]:
        lines.append(f"Nobody answered by {_date(ask['deadline'])}.")
    first = ask["questions"][0]["question"] if ask["questions"] else ""
    about = f"_{_escape(_cut(first, 200))}_ · {_where(data)} · <{ask['url']}|Open in Compass>"
    return {
        "text": _cut(f"{ended}: {_escape(first)}", FALLBACK_CHARS),
        "blocks": [_section("\n".join(lines)), _context(about)],
    }


def _vote_follow_up(data: dict[str, Any]) -> dict[str, Any]:
    ask, vote = data["ask"], data["vote"]
    quorum = ask["quorum"]
    who = _handle(vote["by"])
    if vote["standing_answer_id"]:
        who += "'s standing answer"
    if vote["kind"] == "answer":
        did = f"{who} answered"
    else:
        did = f"{who} declined" + (f": {_escape(vote['reason'])}" if vote["reason"] else "")
    so_far = f"{quorum['answered']} of {quorum['required']} answers so far"
    first = ask["questions"][0]["question"] if ask["questions"] else ""
    about = f"_{_escape(_cut(first, 200))}_ · {_where(data)} · <{ask['url']}|Open in Compass>"
    return {
        "text": _cut(f"{did} ({so_far}): {_escape(first)}", FALLBACK_CHARS),
        "blocks": [_section(f"*{did}*\n{so_far}"), _context(about)],
    }


def message(kind: WebhookEventType, data: dict[str, Any]) -> dict[str, Any]:
    """The Slack message for a notice's data (payloads.py)."""
    if kind is T.ASK_VOTED:
        return _vote_follow_up(data)
    if kind in (T.ASK_POSTED, T.ASK_REMINDED, T.ASK_ESCALATED):
        return _card(data, data.get("asker"), "Answer in Compass")
    if kind is T.INBOX_ITEM_OPENED:
        return _card(data, data.get("agent"), "Answer in Compass")
    return _follow_up(data)
