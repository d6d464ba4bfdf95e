"""Receipts: every ending of an ask, signed.

A receipt is a compact JWS (alg Ed25519) over the claims of one ending
(`claims`): the workspace, the ask's id and its asker, a digest of its
questions, the ending's kind, time, who ended it and through which surface,
the standing rule if one answered, the reason, and the answers as a list
of one entry per answerer (a quorum's K, each with the rule that gave it).
It is derived, never stored: the claims come from the ending as recorded,
written in one canonical form, and Ed25519 signatures are deterministic,
so the same ending signed by the same key is the same receipt whenever it
is read; which key signs which ending is keys.py's rule. docs/receipts.md is the claims' reference.
"""

from __future__ import annotations

import base64
import hashlib
import json
import sys
import uuid
from collections.abc import Callable, Iterable
from typing import Any

from joserfc import jws

from compass_server.receipts.keys import ALG, ReceiptKeys, rfc3339
from compass_server.store.cache import SizedCache
from compass_server.store.types import (
    Answer,
    Ask,
    AskQuestion,
    EndingKind,
    InboxMessage,
    Message,
    VoteKind,
)

# The receipt's JWS `typ`.
TYP = "compass-receipt+jws"
# Receipts kept signed, in bytes they weigh in memory: signing one costs
# ~80 µs, and a page of messages may hold 200 ended asks.
RECEIPT_CACHE_BYTES = 4 << 20


def canonical(value: Any) -> bytes:
    """JSON with sorted keys and no spaces, as UTF-8."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()


def questions_digest(questions: Iterable[AskQuestion]) -> str:
    """`sha256:` and the base64url (unpadded) SHA-256 of the questions' asked
    content, as canonical JSON: for each question in order its id, text,
    header, options (id, label, description, preview), multiplicity and
    recommendation. An agent computes it from the ask it posted."""
    content = [
        {
            "id": q.question_id,
            "question": q.question,
            "header": q.header,
            "options": [
                {"id": o.id, "label": o.label, "description": o.description, "preview": o.preview}
                for o in q.options
            ],
            "multiple": q.allow_multiple,
            "recommended": q.recommended,
        }
        for q in questions
    ]
    digest = hashlib.sha256(canonical(content)).digest()
    return "sha256:" + base64.urlsafe_b64encode(digest).rstrip(b"=").decode()


def _who(account_id: uuid.UUID | None, handle: str) -> dict[str, str] | None:
    return {"id": str(account_id), "handle": handle} if account_id is not None else None


def _rule(standing_answer_id: uuid.UUID | None) -> str | None:
    return str(standing_answer_id) if standing_answer_id is not None else None


def _answered(answers: Iterable[Answer | AskQuestion]) -> list[dict[str, Any]]:
    return [
        {"id": a.question_id, "chosen": list(a.chosen_option_ids), "text": a.custom_text}
        for a in answers
    ]


def _answers(ask: Ask) -> list[dict[str, Any]]:
    """One entry per answerer: a quorum's every answer, in the order
    recorded, or the one answer of any other ask."""
    ending = ask.ending
    assert ending is not None
    if ending.kind is not EndingKind.ANSWERED:
        return []
    if ask.quorum:
        return [
            {
                "by": _who(v.account_id, v.handle),
                "rule": _rule(v.standing_answer_id),
                "questions": _answered(v.answers),
            }
            for v in ask.quorum_votes
            if v.kind is VoteKind.ANSWER
        ]
    return [
        {
            "by": _who(ending.actor_id, ending.actor_handle),
            "rule": _rule(ending.standing_answer_id),
            "questions": _answered(ask.questions),
        }
    ]


def claims(
    issuer: str, workspace_id: uuid.UUID, asker_id: uuid.UUID, ask: Ask
) -> dict[str, Any] | None:
    """What a receipt says of the ask's ending; None while it is open (or
    when it ended before endings were recorded, with no time or actor)."""
    ending = ask.ending
    if ending is None or ending.at is None:
        return None
    return {
        "iss": issuer,
        "ws": str(workspace_id),
        "ask": ask.ask_id,
        "asker": str(asker_id),
        "questions": questions_digest(ask.questions),
        "ending": ending.kind.value,
        "at": rfc3339(ending.at),
        "by": _who(ending.actor_id, ending.actor_handle),
        "surface": ending.surface.value if ending.surface else None,
        "rule": _rule(ending.standing_answer_id),
        "reason": ending.reason,
        "answers": _answers(ask),
    }


class Receipts:
    """Signs endings with the receipt keys; without keys, every receipt is
    empty (receipts are off)."""

    def __init__(
        self, keys: ReceiptKeys | None, issuer: str, cache_bytes: int = RECEIPT_CACHE_BYTES
    ) -> None:
        self.keys = keys
        self.issuer = issuer.rstrip("/")
        # An ending never changes, nor do this process's keys: its receipt neither.
        self._signed: SizedCache[tuple[str, str, str], str] = SizedCache(cache_bytes)

    @property
    def on(self) -> bool:
        return self.keys is not None

    def sign(self, workspace_id: uuid.UUID, asker_id: uuid.UUID, ask: Ask) -> str:
        """The ending's receipt; "" while the ask is open or receipts are off."""
        ending = ask.ending
        if self.keys is None or ending is None or ending.at is None:
            return ""
        cached = (ask.ask_id, ending.kind.value, ending.at.isoformat())
        found = self._signed.get(cached)
        if found is not None:
            return found
        said = claims(self.issuer, workspace_id, asker_id, ask)
        assert said is not None
        key = self.keys.for_ending(ending.at)
        header = {"alg": ALG, "kid": key.kid, "typ": TYP}
        receipt = jws.serialize_compact(header, canonical(said), key.key, algorithms=[ALG])
        self._signed.put(cached, receipt, sys.getsizeof(receipt))
        return receipt

    def stamp(self, workspace_id: uuid.UUID) -> Callable[[Message | InboxMessage, Ask], str]:
        """The receipt of an ask of a message of this workspace (a channel's,
        or an inbox thread's, whose asker is its agent)."""

        def receipt(message: Message | InboxMessage, ask: Ask) -> str:
            return self.sign(workspace_id, message.author_id, ask)

        return receipt

    def jwks(self) -> bytes:
        """The public keys, as /.well-known/jwks.json serves them."""
        return canonical(self.keys.jwks() if self.keys is not None else {"keys": []})
