"""Receipts, verified offline: proof of how an ask ended, and by whom.

Every ending of an ask comes with a receipt (`AskEnding.receipt`, and
`AskAnswerBlock.receipt` on the delivery of an answer): a compact JWS, alg
Ed25519, signed with the server's receipt key, which never enters its
database. With the server's public keys (its JWKS, fetched once from
/.well-known/jwks.json or configured from a file), an agent checks a
receipt without calling anyone, and acts only on a decision it can prove:

    keys = fetch_jwks("https://compass.example.com")     # or load_jwks(path)
    receipt = verify_receipt(ending.receipt, keys, ask=posted_ask)
    receipt.by_handle, receipt.ending, receipt.answer("db")

`verify_receipt` refuses (ReceiptError, saying why) a receipt whose
signature doesn't verify with a key of the set, that names another
algorithm or type, lacks a claim, or, given the ask, is about another ask,
other questions, another ending, another standing rule or other answers
than the ask says (a quorum ask's: each of its answers, who gave it and
the rule that did).
docs/receipts.md lists the claims.
"""

from __future__ import annotations

import base64
import datetime
import hashlib
import json
import pathlib
import ssl
import urllib.request
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from joserfc import jws
from joserfc.errors import JoseError
from joserfc.jwk import KeySet

from compass.v1 import comms_pb2 as pb

__all__ = [
    "ALG",
    "JWKS_PATH",
    "TYP",
    "Receipt",
    "ReceiptError",
    "fetch_jwks",
    "load_jwks",
    "questions_digest",
    "verify_receipt",
]

# RFC 9864's name for EdDSA over Ed25519.
ALG = "Ed25519"
TYP = "compass-receipt+jws"
JWKS_PATH = "/.well-known/jwks.json"

# Each claim and the JSON types it may take.
_CLAIMS: dict[str, tuple[type, ...]] = {
    "iss": (str,),
    "ws": (str,),
    "ask": (str,),
    "asker": (str,),
    "questions": (str,),
    "ending": (str,),
    "at": (str,),
    "by": (dict, type(None)),
    "surface": (str, type(None)),
    "rule": (str, type(None)),
    "reason": (str,),
    "answers": (list,),
}
_KINDS = {
    pb.ASK_ENDING_KIND_ANSWERED: "answered",
    pb.ASK_ENDING_KIND_WITHDRAWN_BY_AGENT: "withdrawn_by_agent",
    pb.ASK_ENDING_KIND_WITHDRAWN_BY_OWNER: "withdrawn_by_owner",
    pb.ASK_ENDING_KIND_DECLINED: "declined",
    pb.ASK_ENDING_KIND_EXPIRED: "expired",
    pb.ASK_ENDING_KIND_REPLACED: "replaced",
    pb.ASK_ENDING_KIND_WITHDRAWN_BY_PERSON: "withdrawn_by_person",
}


class ReceiptError(ValueError):
    """A receipt that proves nothing; the message says why."""


@dataclass(frozen=True, slots=True)
class Receipt:
    """A verified receipt: its signing key's id and its claims."""

    kid: str
    claims: Mapping[str, Any]

    @property
    def ask_id(self) -> str:
        return str(self.claims["ask"])

    @property
    def workspace_id(self) -> str:
        return str(self.claims["ws"])

    @property
    def asker_id(self) -> str:
        return str(self.claims["asker"])

    @property
    def ending(self) -> str:
        """answered, declined, withdrawn_by_agent, withdrawn_by_owner or expired."""
        return str(self.claims["ending"])

    @property
    def at(self) -> datetime.datetime:
        return datetime.datetime.fromisoformat(self.claims["at"])

    @property
    def by_id(self) -> str | None:
        """Who ended it; None for an expiry."""
        by = self.claims["by"]
        return str(by["id"]) if by else None

    @property
    def by_handle(self) -> str | None:
        by = self.claims["by"]
        return str(by["handle"]) if by else None

    @property
    def reason(self) -> str:
        return str(self.claims["reason"])

    @property
    def rule(self) -> str | None:
        """The standing answer that ended the ask; None when a person did."""
        rule = self.claims["rule"]
        return str(rule) if rule else None

    @property
    def answers(self) -> list[dict[str, Any]]:
        """One entry per answerer (a quorum ask's K, in the order recorded):
        `by`, `rule` (the standing answer that gave it, or None) and each
        question's `id`, `chosen` option ids and free `text`."""
        return list(self.claims["answers"])

    def answer(self, question_id: str) -> dict[str, Any] | None:
        """The first answerer's answer to one question: {id, chosen, text}."""
        for entry in self.answers:
            for q in entry["questions"]:
                if q["id"] == question_id:
                    return dict(q)
        return None


def _canonical(value: Any) -> bytes:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()


def questions_digest(questions: Iterable[pb.AskQuestion]) -> str:
    """The receipt's `questions` claim for these questions: `sha256:` and the
    unpadded base64url SHA-256 of their asked content as canonical JSON (see
    docs/receipts.md). Answer state is not part of it."""
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
            "recommended": q.recommended if q.HasField("recommended") else None,
        }
        for q in questions
    ]
    digest = hashlib.sha256(_canonical(content)).digest()
    return "sha256:" + base64.urlsafe_b64encode(digest).rstrip(b"=").decode()


def fetch_jwks(
    url: str, *, timeout: float = 10.0, context: ssl.SSLContext | None = None
) -> dict[str, Any]:
    """The server's public keys: `url` is its address (http(s)://host:port,
    where the page is) or the JWKS's own URL."""
    if not url.endswith(".json"):
        url = url.rstrip("/") + JWKS_PATH
    if not url.startswith(("http://", "https://")):
        raise ValueError(f"{url!r} is not an http:// or https:// URL")
    with urllib.request.urlopen(url, timeout=timeout, context=context) as response:
        jwks: dict[str, Any] = json.loads(response.read())
    return jwks


def load_jwks(path: str | pathlib.Path) -> dict[str, Any]:
    """Public keys kept in a file (a JWKS, as the server serves it)."""
    jwks: dict[str, Any] = json.loads(pathlib.Path(path).read_text())
    return jwks


def _key_set(jwks: Mapping[str, Any] | KeySet) -> KeySet:
    if isinstance(jwks, KeySet):
        return jwks
    keys = [
        {k: v for k, v in key.items() if k != "d"}
        for key in jwks.get("keys", [])
        if isinstance(key, dict) and key.get("kty") == "OKP" and key.get("crv") == "Ed25519"
    ]
    try:
        return KeySet.import_key_set({"keys": keys})
    except JoseError as exc:
        raise ReceiptError(f"the key set is not usable: {exc.description}") from None


def _header(receipt: str) -> dict[str, Any]:
    try:
        header: dict[str, Any] = jws.extract_compact(receipt.encode()).headers()
    except (JoseError, ValueError):
        raise ReceiptError("not a compact JWS") from None
    return header


def _check_claims(claims: object) -> dict[str, Any]:
    if not isinstance(claims, dict):
        raise ReceiptError("its payload is not a JSON object")
    for name, kinds in _CLAIMS.items():
        if name not in claims:
            raise ReceiptError(f"it lacks the {name!r} claim")
        if not isinstance(claims[name], kinds):
            raise ReceiptError(f"its {name!r} claim has the wrong type")
    try:
        datetime.datetime.fromisoformat(claims["at"])
    except ValueError:
        raise ReceiptError("its 'at' claim is not a time") from None
    return claims


def _said(answers: Iterable[pb.QuorumAnswer]) -> list[dict[str, Any]]:
    return [
        {"id": a.question_id, "chosen": list(a.chosen_option_ids), "text": a.custom_text}
        for a in answers
    ]


def _check_ask(receipt: Receipt, ask: pb.Ask) -> None:
    if receipt.ask_id != ask.ask_id:
        raise ReceiptError(f"it is the receipt of ask {receipt.ask_id}, not of {ask.ask_id}")
    if receipt.claims["questions"] != questions_digest(ask.questions):
        raise ReceiptError("its questions are not this ask's")
    kind = _KINDS.get(ask.ending.kind) if ask.HasField("ending") else None
    if kind is None and ask.answered:
        kind = "answered"
    if kind is not None and kind != receipt.ending:
        raise ReceiptError(f"it says the ask was {receipt.ending}, not {kind}")
    # An ending that says who ended it says which rule did, if one did.
    if ask.ending.actor_account_id and receipt.claims["rule"] != (
        ask.ending.standing_answer_id or None
    ):
        raise ReceiptError(f"its rule {receipt.claims['rule']!r} is not the ending's")
    if kind != "answered":
        return
    if ask.quorum or ask.quorum_votes:
        votes = [
            {
                "id": v.account_id,
                "rule": v.standing_answer_id or None,
                "questions": _said(v.answers),
            }
            for v in ask.quorum_votes
            if v.kind == pb.QUORUM_VOTE_KIND_ANSWER
        ]
        said = [
            {
                "id": (a.get("by") or {}).get("id"),
                "rule": a.get("rule"),
                "questions": a.get("questions"),
            }
            for a in receipt.answers
        ]
        if said != votes:
            raise ReceiptError("its answers are not the quorum's answers")
        return
    for q in ask.questions:
        answer = receipt.answer(q.question_id)
        if answer is None or (answer["chosen"], answer["text"]) != (
            list(q.chosen_option_ids),
            q.custom_text,
        ):
            raise ReceiptError(f"its answer to {q.question_id!r} is not the ask's")


def verify_receipt(
    receipt: str,
    jwks: Mapping[str, Any] | KeySet,
    *,
    ask: pb.Ask | None = None,
    workspace_id: str | None = None,
    issuer: str | None = None,
) -> Receipt:
    """The receipt's claims once its signature verifies with a key of `jwks`;
    with `ask`, also that it is that ask's (its id and questions, and its
    ending and answers if the ask carries them); with `workspace_id` or
    `issuer`, that it names them. ReceiptError otherwise."""
    if not receipt:
        raise ReceiptError("there is no receipt (the server signs none without a receipt key)")
    header = _header(receipt)
    if header.get("alg") != ALG:
        raise ReceiptError(f"it is signed with {header.get('alg')!r}, not {ALG}")
    if header.get("typ") != TYP:
        raise ReceiptError(f"its type is {header.get('typ')!r}, not {TYP}")
    keys = _key_set(jwks)
    kid = header.get("kid")
    if not isinstance(kid, str) or kid not in {k.kid for k in keys.keys}:
        raise ReceiptError(f"it is signed by key {kid!r}, which the key set doesn't hold")
    try:
        verified = jws.deserialize_compact(receipt, keys, algorithms=[ALG])
        claims = json.loads(verified.payload)
    except (JoseError, ValueError):
        raise ReceiptError("its signature doesn't verify") from None
    out = Receipt(kid, _check_claims(claims))
    if ask is not None:
        _check_ask(out, ask)
    if workspace_id is not None and out.workspace_id != workspace_id:
        raise ReceiptError(f"it is of workspace {out.workspace_id}, not {workspace_id}")
    if issuer is not None and out.claims["iss"] != issuer.rstrip("/"):
        raise ReceiptError(f"it was issued by {out.claims['iss']}, not {issuer}")
    return out
