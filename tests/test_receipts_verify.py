"""A receipt as the kit verifies it, offline: signed by the server's code from
an ending recorded in the database, checked by the kit's `verify_receipt`
with nothing but the JWKS. Every field tampered with fails; the kit's digest
of questions is the server's for any questions; which key signs which
ending survives rotation."""

from __future__ import annotations

import base64
import dataclasses
import datetime
import json
import pathlib
import subprocess
import uuid
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as hs

from compass.v1 import comms_pb2 as pb
from compass_agentkit.receipts import ReceiptError, questions_digest, verify_receipt
from compass_server.api import mapping as wire
from compass_server.receipts import Receipts
from compass_server.receipts import questions_digest as server_digest
from compass_server.receipts.keys import ReceiptKeys, new_key_file
from compass_server.store.types import (
    Answer,
    AskEnding,
    AskOption,
    AskQuestion,
    EndingKind,
    Surface,
)
from tests.procs import BIN
from tests.world import World, two_question_ask

ISSUER = "https://compass.example.com"


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def _unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def _with_payload(receipt: str, claims: dict[str, Any]) -> str:
    header, _, signature = receipt.split(".")
    body = json.dumps(claims, sort_keys=True, separators=(",", ":")).encode()
    return f"{header}.{_b64(body)}.{signature}"


def _with_header(receipt: str, **changed: Any) -> str:
    header, payload, signature = receipt.split(".")
    said = {**json.loads(_unb64(header)), **changed}
    return f"{_b64(json.dumps(said).encode())}.{payload}.{signature}"


async def _answered(w: World) -> tuple[Any, Any]:
    """An ask the agent posted and ada answered: its message as posted, and
    as it ended."""
    posted = await w.post_ask()
    ask = posted.blocks[0]
    ended, _ = await w.store.answer_ask(
        w.human,
        ask.ask_id,  # type: ignore[union-attr]
        [Answer("db", ("pg",)), Answer("langs", ("py", "go"), "and Rust")],
        surface=Surface.WEB,
    )
    return posted, ended


async def test_a_receipt_says_who_ended_the_ask_and_how_and_verifies_with_the_jwks_alone(
    world: World, tmp_path: pathlib.Path
) -> None:
    new_key_file(tmp_path)
    receipts = Receipts(ReceiptKeys.load(tmp_path), ISSUER + "/")
    posted, ended = await _answered(world)
    receipt = receipts.sign(world.workspace_id, ended.author_id, ended.blocks[0])
    jwks = json.loads(receipts.jwks())
    assert all("d" not in key for key in jwks["keys"])

    # The agent holds the ask it posted (as the server echoed it) and the receipt.
    asked = wire.message_to_wire(posted).blocks[0].ask
    verified = verify_receipt(receipt, jwks, ask=asked, workspace_id=str(world.workspace_id))
    assert (verified.ask_id, verified.ending, verified.by_handle, verified.reason) == (
        asked.ask_id,
        "answered",
        "ada",
        "",
    )
    assert verified.by_id == str(world.human.account_id)
    assert verified.asker_id == str(world.agent.account_id)
    assert verified.claims["iss"] == ISSUER
    assert verified.claims["surface"] == "web"
    assert verified.claims["rule"] is None
    assert verified.answer("langs") == {"id": "langs", "chosen": ["py", "go"], "text": "and Rust"}
    assert [a["by"]["handle"] for a in verified.answers] == ["ada"]
    assert verified.at == ended.blocks[0].ending.at
    # The ask as delivered, answers and all, agrees with its receipt.
    verify_receipt(receipt, jwks, ask=wire.message_to_wire(ended).blocks[0].ask)
    # Derived, not stored: signed again (kept signed, or past the bound of what a
    # process keeps), the same receipt.
    assert receipts.sign(world.workspace_id, ended.author_id, ended.blocks[0]) == receipt
    unkept = Receipts(ReceiptKeys.load(tmp_path), ISSUER, cache_bytes=1)
    assert unkept.sign(world.workspace_id, ended.author_id, ended.blocks[0]) == receipt


async def test_every_field_tampered_with_fails_verification(
    world: World, tmp_path: pathlib.Path
) -> None:
    new_key_file(tmp_path)
    receipts = Receipts(ReceiptKeys.load(tmp_path), ISSUER)
    posted, ended = await _answered(world)
    receipt = receipts.sign(world.workspace_id, ended.author_id, ended.blocks[0])
    jwks = json.loads(receipts.jwks())
    claims = json.loads(_unb64(receipt.split(".")[1]))
    assert set(claims) == {
        "iss",
        "ws",
        "ask",
        "asker",
        "questions",
        "ending",
        "at",
        "by",
        "surface",
        "rule",
        "reason",
        "answers",
    }
    changed: dict[str, Any] = {
        "iss": "https://evil.example.com",
        "ws": str(uuid.uuid4()),
        "ask": "ask_forged",
        "asker": str(uuid.uuid4()),
        "questions": "sha256:" + _b64(b"\0" * 32),
        "ending": "declined",
        "at": "2020-01-01T00:00:00.000000Z",
        "by": {"id": str(world.other_human.account_id), "handle": "grace"},
        "surface": "grpc",
        "rule": "rule_1",
        "reason": "no",
        "answers": [],
    }
    for name, value in changed.items():
        assert claims[name] != value, name
        with pytest.raises(ReceiptError, match="signature"):
            verify_receipt(_with_payload(receipt, {**claims, name: value}), jwks)
    # Inside the answers, too: another option chosen.
    answers = json.loads(json.dumps(claims["answers"]))
    answers[0]["questions"][0]["chosen"] = ["my"]
    with pytest.raises(ReceiptError, match="signature"):
        verify_receipt(_with_payload(receipt, {**claims, "answers": answers}), jwks)
    # A claim dropped.
    without = {k: v for k, v in claims.items() if k != "reason"}
    with pytest.raises(ReceiptError):
        verify_receipt(_with_payload(receipt, without), jwks)
    # The header: another key id, the deprecated or no algorithm, another type.
    with pytest.raises(ReceiptError, match="key set doesn't hold"):
        verify_receipt(_with_header(receipt, kid="someone-else"), jwks)
    for alg in ("EdDSA", "none", "HS256"):
        with pytest.raises(ReceiptError, match="signed with"):
            verify_receipt(_with_header(receipt, alg=alg), jwks)
    with pytest.raises(ReceiptError, match="type"):
        verify_receipt(_with_header(receipt, typ="JWT"), jwks)
    # The signature itself.
    header, payload, signature = receipt.split(".")
    flipped = bytearray(_unb64(signature))
    flipped[0] ^= 1
    with pytest.raises(ReceiptError, match="signature"):
        verify_receipt(f"{header}.{payload}.{_b64(bytes(flipped))}", jwks)
    # Another server's keys.
    other = tmp_path / "other"
    new_key_file(other)
    with pytest.raises(ReceiptError):
        verify_receipt(receipt, ReceiptKeys.load(other).jwks())
    # A true receipt of another ask, or of other answers, is refused for this one.
    asked = wire.message_to_wire(posted).blocks[0].ask
    elsewhere = pb.Ask()
    elsewhere.CopyFrom(asked)
    elsewhere.ask_id = "ask_other"
    with pytest.raises(ReceiptError, match="not of ask_other"):
        verify_receipt(receipt, jwks, ask=elsewhere)
    reworded = pb.Ask()
    reworded.CopyFrom(asked)
    reworded.questions[0].question = "Which cache?"
    with pytest.raises(ReceiptError, match="questions"):
        verify_receipt(receipt, jwks, ask=reworded)
    delivered = wire.message_to_wire(ended).blocks[0].ask
    delivered.questions[0].chosen_option_ids[:] = ["my"]
    with pytest.raises(ReceiptError, match="answer to 'db'"):
        verify_receipt(receipt, jwks, ask=delivered)
    with pytest.raises(ReceiptError, match="workspace"):
        verify_receipt(receipt, jwks, workspace_id=str(uuid.uuid4()))
    with pytest.raises(ReceiptError, match="no receipt"):
        verify_receipt("", jwks)


async def test_each_ending_kind_has_its_receipt(world: World, tmp_path: pathlib.Path) -> None:
    new_key_file(tmp_path)
    receipts = Receipts(ReceiptKeys.load(tmp_path), ISSUER)
    jwks = receipts.keys.jwks() if receipts.keys else {}
    declined_ask = (await world.post_ask()).blocks[0]
    declined = await world.store.decline_ask(
        world.human,
        declined_ask.ask_id,
        "not now",
        surface=Surface.GRPC,  # type: ignore[union-attr]
    )
    withdrawn_ask = (await world.post_ask()).blocks[0]
    withdrawn, _ = await world.store.withdraw_ask(
        world.human,
        withdrawn_ask.ask_id,
        surface=Surface.CONNECT,  # type: ignore[union-attr]
    )
    mine_ask = (await world.post_ask()).blocks[0]
    mine, _ = await world.store.cancel_ask(
        world.agent,
        mine_ask.ask_id,
        surface=Surface.RELAY,  # type: ignore[union-attr]
    )
    seen = {}
    for message in (declined, withdrawn, mine):
        receipt = receipts.sign(world.workspace_id, message.author_id, message.blocks[0])
        r = verify_receipt(receipt, jwks, ask=wire.message_to_wire(message).blocks[0].ask)
        seen[r.ending] = (r.by_handle, r.claims["surface"], r.reason, r.answers)
    assert seen == {
        "declined": ("ada", "grpc", "not now", []),
        "withdrawn_by_owner": ("ada", "connect", "", []),
        "withdrawn_by_agent": ("scout", "relay", "", []),
    }
    # An expiry has nobody behind it; the server's clock at the deadline.
    ask = dataclasses.replace(
        two_question_ask(),
        ask_id="ask_x",
        ending=AskEnding(
            EndingKind.EXPIRED,
            datetime.datetime(2026, 1, 1, tzinfo=datetime.UTC),
            None,
            "",
            Surface.SERVER,
        ),
    )
    r = verify_receipt(receipts.sign(world.workspace_id, world.agent.account_id, ask), jwks)
    assert (r.ending, r.by_id, r.by_handle, r.claims["at"]) == (
        "expired",
        None,
        None,
        "2026-01-01T00:00:00.000000Z",
    )
    # An open ask has none; receipts off, none either.
    assert receipts.sign(world.workspace_id, world.agent.account_id, two_question_ask()) == ""
    assert Receipts(None, ISSUER).sign(world.workspace_id, world.agent.account_id, ask) == ""
    assert json.loads(Receipts(None, ISSUER).jwks()) == {"keys": []}


def test_an_ending_is_signed_by_the_newest_key_of_its_time_and_old_receipts_hold(
    tmp_path: pathlib.Path,
) -> None:
    day = datetime.timedelta(days=1)
    now = datetime.datetime.now(datetime.UTC)
    old, _ = new_key_file(tmp_path, now - 10 * day)
    keys = ReceiptKeys.load(tmp_path)

    def ended(at: datetime.datetime) -> Any:
        return dataclasses.replace(
            two_question_ask(),
            ask_id=f"ask_{at.timestamp()}",
            ending=AskEnding(EndingKind.DECLINED, at, uuid.uuid4(), "ada", Surface.WEB, "no"),
        )

    ws, asker = uuid.uuid4(), uuid.uuid4()
    before = ended(now - day)
    first = Receipts(keys, ISSUER).sign(ws, asker, before)
    # A new key, published now, signing from tomorrow: today's endings keep the old.
    new, _ = new_key_file(tmp_path, now + day)
    rotated = ReceiptKeys.load(tmp_path)
    assert {k["kid"] for k in rotated.jwks()["keys"]} == {old.kid, new.kid}
    receipts = Receipts(rotated, ISSUER)
    assert receipts.sign(ws, asker, before) == first
    assert verify_receipt(receipts.sign(ws, asker, ended(now)), rotated.jwks()).kid == old.kid
    later = receipts.sign(ws, asker, ended(now + 2 * day))
    assert verify_receipt(later, rotated.jwks()).kid == new.kid
    # Receipts given out before still verify with the rotated set.
    assert verify_receipt(first, rotated.jwks()).kid == old.kid
    # Withdrawing the old key: what it signed no longer verifies; its endings
    # are signed by the key that remains.
    (tmp_path / f"{old.kid}.json").unlink()
    remaining = ReceiptKeys.load(tmp_path)
    with pytest.raises(ReceiptError):
        verify_receipt(first, remaining.jwks())
    assert verify_receipt(Receipts(remaining, ISSUER).sign(ws, asker, before), remaining.jwks())


def test_a_key_folder_that_holds_no_usable_key_says_what_to_do(tmp_path: pathlib.Path) -> None:
    from compass_server.receipts.keys import KeyProblem

    with pytest.raises(KeyProblem, match="holds no key; make one with"):
        ReceiptKeys.load(tmp_path)
    (tmp_path / "junk.json").write_text('{"signs_from": "2026-01-01T00:00:00Z"}')
    with pytest.raises(KeyProblem, match=r"junk\.json is not a receipt key"):
        ReceiptKeys.load(tmp_path)
    (tmp_path / "junk.json").unlink()
    made = ReceiptKeys.load(tmp_path / "new", create=True)
    assert len(made.keys) == 1
    assert (tmp_path / "new" / f"{made.keys[0].kid}.json").stat().st_mode & 0o077 == 0


# --- the digest of questions, as the kit and the server compute it -----------------

_TEXT = hs.text(max_size=12)
_OPTION = hs.builds(AskOption, id=_TEXT, label=_TEXT, description=_TEXT, preview=_TEXT)
_QUESTION = hs.builds(
    AskQuestion,
    question_id=_TEXT,
    question=_TEXT,
    header=_TEXT,
    options=hs.lists(_OPTION, max_size=4).map(tuple),
    allow_multiple=hs.booleans(),
    recommended=hs.none() | hs.integers(-(2**31), 2**31 - 1),
)


@settings(max_examples=200, suppress_health_check=[HealthCheck.too_slow], deadline=None)
@given(hs.lists(_QUESTION, min_size=1, max_size=5), hs.lists(_QUESTION, min_size=1, max_size=5))
def test_the_kit_digests_questions_as_the_server_does(
    questions: list[AskQuestion], others: list[AskQuestion]
) -> None:
    wired = wire.questions_to_wire(questions)
    assert questions_digest(wired) == server_digest(questions)
    # Answer state is not part of it.
    for q in wired:
        q.chosen_option_ids.append("x")
        q.custom_text = "typed"
    assert questions_digest(wired) == server_digest(questions)
    assert (server_digest(questions) == server_digest(others)) == (questions == others)


def test_the_operator_makes_a_key_that_signs_from_its_time(tmp_path: pathlib.Path) -> None:
    def new_key(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [
                BIN / "compass-server",
                "admin",
                "new-receipt-key",
                "--receipt-keys-dir",
                str(tmp_path),
                *args,
            ],
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )

    made = new_key("--signs-from", "2027-06-01T00:00:00+02:00")
    assert made.returncode == 0, made.stderr
    said = json.loads(made.stdout)
    assert said["signs_from"] == "2027-05-31T22:00:00.000000Z"
    (key,) = ReceiptKeys.load(tmp_path).keys
    assert key.kid == said["kid"] and said["file"] == str(tmp_path / f"{key.kid}.json")
    refused = new_key("--signs-from", "2027-06-01")
    assert refused.returncode == 2
    assert "is not an RFC 3339 time with its offset" in refused.stderr
