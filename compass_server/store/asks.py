"""How an ask ends, and its record.

An ask ends exactly once: answered, withdrawn by its agent or by the agent's
owner, declined, or expired at its deadline. Every ending goes through one
SQL path (compass_write_ending, migration 0009) under the ask message's row
lock, with its history entry and its events, so exactly one ending wins a
race and the others are told which one did. Refusals come in the order
visibility (NOT_FOUND), permission (PERMISSION_DENIED), state
(ALREADY_EXISTS), input (INVALID_ARGUMENT), whatever the surface.

A deadline is a cutoff (migration 0021): an ending that holds the row at or
after it expires the ask instead, and every read shows an ask past its
deadline expired, by the database's clock, swept or not.

A quorum ask (migration 0025) needs K of the people it names: each one's
answer, or a decline that doesn't end it, is a vote, recorded under the
same row lock and final for its person; the K-th answer is the ending.
"""

from __future__ import annotations

import dataclasses
import datetime
import uuid
from collections.abc import Callable, Sequence
from typing import Any

from psycopg.types.json import Jsonb

from compass_server.store import blocks as blockrules
from compass_server.store.cache import SizedCache
from compass_server.store.coalesce import Coalescer
from compass_server.store.db import Database, queries, signed_out
from compass_server.store.errors import (
    Conflict,
    Corrupt,
    InvalidArgument,
    NotFound,
    PermissionDenied,
    ResourceExhausted,
    StoreError,
    quoted,
)
from compass_server.store.standing import StandingAnswers
from compass_server.store.types import (
    AccountKind,
    Actor,
    Answer,
    Ask,
    AskChange,
    AskHistory,
    AskHistoryEntry,
    Block,
    EndingKind,
    Message,
    StandingAnswer,
    StandingTerms,
    Surface,
)
from compass_server.store.weight import weigh

ASKS = queries("asks")

# Asks one expiry sweep ends in one transaction.
EXPIRY_BATCH = 200
# The ask cache's bound, in bytes its asks' content weighs in memory.
ASK_CACHE_BYTES = 64 << 20

_ENDED = {
    EndingKind.ANSWERED: "is already answered",
    EndingKind.WITHDRAWN_BY_AGENT: "is already withdrawn",
    EndingKind.WITHDRAWN_BY_OWNER: "is already withdrawn by its agent's owner",
    EndingKind.DECLINED: "is already declined",
    EndingKind.EXPIRED: "is already expired",
}


def refusal(status: str, ask_id: str) -> StoreError:
    """The error for a refusal the ask functions of migrations 0009 and 0025
    return."""
    if status == "voted_answer":
        return Conflict(f"you already answered ask {quoted(ask_id)}; a vote in a quorum is final")
    if status == "voted_decline":
        return Conflict(f"you already declined ask {quoted(ask_id)}; a vote in a quorum is final")
    if status == "standing_full":
        return ResourceExhausted(
            "you have the most standing answers a person may have in force; revoke one first "
            "(nothing was recorded)"
        )
    if status == "standing_not_agent":
        return InvalidArgument(
            f"ask {quoted(ask_id)} was asked by a person; a standing answer answers an agent's "
            "asks (nothing was recorded)"
        )
    if status == "unscoped":
        return signed_out()
    if status == "not_found":
        return NotFound(f"no ask {quoted(ask_id)}")
    if status == "not_named":
        return PermissionDenied(
            f"ask {quoted(ask_id)} is asked of other people; only they may answer or decline it"
        )
    if status == "not_author":
        return PermissionDenied(f"only the asker can withdraw ask {quoted(ask_id)}")
    if status == "not_owner":
        return PermissionDenied(
            f"only the owner of the agent that asked can withdraw ask {quoted(ask_id)}"
        )
    if status in _ENDED:
        return Conflict(f"ask {quoted(ask_id)} {_ENDED[EndingKind(status)]}")
    return Corrupt(f"ask {quoted(ask_id)}: the change could not be applied ({status})")


def ending_item(p: dict[str, Any]) -> dict[str, Any]:
    """An ending's parameters as an item of compass_end_asks."""
    item = {
        k: v
        for k, v in p.items()
        if k not in ("cred", "actor", "answered", "answer_id", "standing")
    }
    item["cred"] = p["cred"].hex()
    item["actor"] = str(p["actor"])
    if "answered" in p:
        item["answered"] = p["answered"].obj
        item["answer_id"] = str(p["answer_id"])
        item["standing"] = p["standing"].obj if p["standing"] is not None else None
    return item


def _always_chosen(ask: Ask, answers: Sequence[Answer]) -> StandingTerms | None:
    """The standing answer an ask's "always" option makes when it is chosen
    (a hook's "Always allow this rule"): the person chose it, so it stands."""
    always = ask.always
    if always is None:
        return None
    for answer in answers:
        if (
            answer.question_id == always.question_id
            and always.option_id in answer.chosen_option_ids
        ):
            return StandingTerms(datetime.timedelta(seconds=always.seconds))
    return None


def _check_ask_id(ask_id: str) -> None:
    if not ask_id:
        raise InvalidArgument("ask_id is required")


def _person(actor: Actor) -> None:
    if actor.kind is not AccountKind.HUMAN:
        raise PermissionDenied("agents never answer or decline asks")


def _first_follow_up(ask: Ask, posted: datetime.datetime | None) -> datetime.datetime | None:
    """When the ask's first follow-up step is due (as migration 0032 sets it)."""
    f = ask.follow_up
    if f is None or posted is None:
        return None
    waits = [w for w in (f.remind_after, f.escalate_after) if w is not None]
    return posted + min(waits) if waits else None


class AskCache:
    """Asks' content by id, bounded by what it weighs in memory (an ask of
    many small options weighs ~6× its encoded bytes). Content never
    changes after append, so a copy can check answers without a read; state
    always comes from the locked row."""

    def __init__(self, max_bytes: int = ASK_CACHE_BYTES) -> None:
        self._asks: SizedCache[str, Ask] = SizedCache(max_bytes)

    def get(self, ask_id: str) -> Ask | None:
        return self._asks.get(ask_id)

    def put(self, ask: Ask, size: int) -> None:
        """Keeps the ask's content alone, counted at what it weighs (`size`,
        its encoded bytes, when that is more)."""
        content = Ask(
            questions=tuple(blockrules.pending(q) for q in ask.questions),
            ask_id=ask.ask_id,
            trace=ask.trace,
            always=ask.always,
        )
        self._asks.put(ask.ask_id, content, max(size, weigh(content)))


@dataclasses.dataclass(frozen=True, slots=True)
class Answered:
    """What an answer did: the ask's message (ended, or a quorum ask with the
    vote added), the ask_answer message when it ended the ask, and the
    standing answer it made, when it asked for one."""

    ask_message: Message
    answer_message: Message | None
    standing_answer: StandingAnswer | None = None


@dataclasses.dataclass(frozen=True, slots=True)
class _Seen:
    """An ask as one reader sees it, unlocked."""

    ask: Ask
    may_answer: bool
    owner_id: uuid.UUID | None


class AskEndings(StandingAnswers):
    """The store's asks: posting's checks of answerers and deadlines, every
    ending, the expiry sweep and the history, and the standing answers an
    answer makes. Mixed into Store."""

    db: Database
    _asks: AskCache
    _endings: Coalescer
    deadline_bounds: blockrules.DeadlineBounds
    # Called with each deadline this process posts, so an expiry loop can wake for it.
    deadline_listeners: list[Callable[[datetime.datetime], None]]
    # Called after commit with each ending's kind, how many asks it ended and,
    # for one ask, its message as it ended.
    ending_listeners: list[Callable[[str, int, Message | None], None]]

    # --- posting ----------------------------------------------------------------

    async def _name_answerers(
        self, actor: Actor, channel_id: uuid.UUID, blocks: Sequence[Block]
    ) -> list[Block]:
        """The blocks with each ask's answerers checked and their handles filled:
        every one a person in the channel, else INVALID_ARGUMENT (after
        NOT_FOUND when the author can't post there)."""
        await self._may_repost(actor, blocks)
        named = {i for b in blocks if isinstance(b, Ask) for i in b.answerer_ids}
        named |= {
            i
            for b in blocks
            if isinstance(b, Ask) and b.follow_up is not None
            for i in b.follow_up.escalate_to
        }
        if not named:
            return list(blocks)
        async with self.db.tx(actor) as conn:
            cur = await conn.execute(
                ASKS["answerers"],
                {"channel_id": channel_id, "author_id": actor.account_id, "ids": sorted(named)},
            )
            rows = await cur.fetchall()
        if not rows[0]["author_member"]:
            raise NotFound(f"no channel {channel_id}")
        handles = {
            r["id"]: r["handle"] for r in rows if r["kind"] == AccountKind.HUMAN and r["member"]
        }
        out: list[Block] = []
        for i, block in enumerate(blocks):
            if isinstance(block, Ask) and block.answerer_ids:
                for account_id in block.answerer_ids:
                    if account_id not in handles:
                        raise InvalidArgument(
                            f"block {i} ask names {account_id} as an answerer, who is not a "
                            "person in this channel"
                        )
                block = dataclasses.replace(
                    block, answerer_handles=tuple(handles[a] for a in block.answerer_ids)
                )
            if isinstance(block, Ask) and block.follow_up is not None:
                for account_id in block.follow_up.escalate_to:
                    if account_id not in handles:
                        raise InvalidArgument(
                            f"block {i} ask escalates to {account_id}, who is not a "
                            "person in this channel"
                        )
            out.append(block)
        return out

    async def _may_repost(self, actor: Actor, blocks: Sequence[Block]) -> None:
        """INVALID_ARGUMENT unless the author may post in each channel its asks
        escalate to."""
        for i, b in enumerate(blocks):
            if not isinstance(b, Ask) or b.follow_up is None:
                continue
            channel = b.follow_up.escalate_to_channel
            if channel is None:
                continue
            async with self.db.tx(actor) as conn:
                cur = await conn.execute(
                    ASKS["may_post_in"], {"channel_id": channel, "author_id": actor.account_id}
                )
                row = await cur.fetchone()
            if row is None or not row["may"]:
                raise InvalidArgument(
                    f"block {i} ask escalates to channel {channel}, which you can't post in"
                )

    def _posted(self, message: Message, sizes: Sequence[int]) -> None:
        """Caches the message's asks; `sizes` are its blocks' encoded bytes.
        An ask a standing answer answered at its post ended there."""
        for block, size in zip(message.blocks, sizes, strict=True):
            if isinstance(block, Ask):
                self._asks.put(block, size)
                if block.ending is not None:
                    self._ended(block.ending.kind.value, 1, message)
                    continue
                if block.deadline is not None:
                    for listener in self.deadline_listeners:
                        listener(block.deadline)
                first = _first_follow_up(block, message.created_at)
                if first is not None:
                    for listener in self.deadline_listeners:
                        listener(first)

    # --- reading an ask unlocked -------------------------------------------------

    async def _seen(self, actor: Actor, ask_id: str) -> _Seen:
        """The ask as the actor may see it, unlocked; NOT_FOUND when it can't."""
        async with self.db.tx(actor) as conn:
            cur = await conn.execute(
                ASKS["ask_state"], {"ask_id": ask_id, "actor": actor.account_id}
            )
            row = await cur.fetchone()
        if row is None or row["state"] is None:
            raise NotFound(f"no ask {quoted(ask_id)}")
        ask = blockrules.block_from_json({"kind": "ask", "ask": row["state"]["ask"]})
        if not isinstance(ask, Ask):
            raise Corrupt(f"ask {quoted(ask_id)} is indexed but missing from its message")
        self._asks.put(ask, blockrules.encoded_size(row["state"]["ask"]))
        return _Seen(
            blockrules.ask_as_of(ask, row["read_at"]), bool(row["may_answer"]), row["owner_id"]
        )

    async def _ask_state(self, actor: Actor, ask_id: str) -> Ask:
        return (await self._seen(actor, ask_id)).ask

    async def _open_to_answer(self, actor: Actor, ask_id: str) -> Ask:
        """The ask, or the refusal an answer or a decline gets before its input
        is looked at: visibility, then permission, then state."""
        seen = await self._seen(actor, ask_id)
        if not seen.may_answer:
            raise refusal("not_named", ask_id)
        if seen.ask.ending is not None:
            raise refusal(seen.ask.ending.kind, ask_id)
        vote = seen.ask.vote_of(actor.account_id)
        if vote is not None:
            raise refusal(f"voted_{vote.kind}", ask_id)
        return seen.ask

    # --- endings -----------------------------------------------------------------

    async def answer_ask(
        self,
        actor: Actor,
        ask_id: str,
        answers: Sequence[Answer],
        *,
        surface: Surface | None = None,
    ) -> tuple[Message, Message | None]:
        """`answer` with no standing answer: the ask's message and the
        ask_answer message (None for a vote that left a quorum short)."""
        done = await self.answer(actor, ask_id, answers, surface=surface)
        return done.ask_message, done.answer_message

    async def answer(
        self,
        actor: Actor,
        ask_id: str,
        answers: Sequence[Answer],
        *,
        surface: Surface | None = None,
        standing: StandingTerms | None = None,
    ) -> Answered:
        """Answers every question at once: ends the ask answered, or, for a
        quorum ask short of its K-th answer, records the actor's vote. With
        `standing`, the answer also becomes a standing answer, in the same
        transaction.

        An ask's content never changes, so the answers are checked against a
        cached copy; permission and state are checked on the locked row."""
        _person(actor)
        _check_ask_id(ask_id)
        ask = self._asks.get(ask_id)
        if ask is None:
            ask = await self._open_to_answer(actor, ask_id)
        if standing is None:
            standing = _always_chosen(ask, answers)
        try:
            answered = blockrules.apply_answers(ask, answers)
            terms = self.standing_terms(standing)
        except InvalidArgument:
            await self._open_to_answer(actor, ask_id)
            raise
        row = await self._endings.write(
            {
                "cred": actor.credential,
                "actor": actor.account_id,
                "ask_id": ask_id,
                "answered": Jsonb(blockrules.block_to_json(answered)["ask"]["questions"]),
                "answer_id": uuid.uuid4(),
                "surface": surface.value if surface else None,
                "standing": Jsonb(terms) if terms is not None else None,
            },
            sum(len(a.custom_text) + 64 * (1 + len(a.chosen_option_ids)) for a in answers),
        )
        result: dict[str, Any] = row["result"] if row else {"status": "not_found"}
        if result["status"] not in ("taken", "recorded"):
            self._expired_instead(actor, result)
            raise refusal(result["status"], ask_id)
        ask_message = blockrules.message_from_json(result["ask_message"])
        answer_message = None
        if result["status"] == "taken":
            self._ended(EndingKind.ANSWERED.value, 1, ask_message)
            answer_message = blockrules.message_from_json(result["answer_message"])
        made = None
        if "standing" in result:
            made = await self.standing_answer(
                actor, uuid.UUID(result["standing"]["standing_answer_id"])
            )
        return Answered(ask_message, answer_message, made)

    async def decline_ask(
        self, actor: Actor, ask_id: str, reason: str = "", *, surface: Surface | None = None
    ) -> Message:
        """Ends the ask without an answer; whoever may answer may decline. The
        asking agent hears the reason. In a quorum ask that counts declines
        against its quorum, a decline that leaves the quorum reachable is a
        vote and the ask stays open."""
        _person(actor)
        _check_ask_id(ask_id)
        try:
            blockrules.check_reason(reason)
        except InvalidArgument:
            await self._open_to_answer(actor, ask_id)
            raise
        message, _ = await self._end(actor, ask_id, EndingKind.DECLINED, surface, reason)
        return message

    async def cancel_ask(
        self, actor: Actor, ask_id: str, *, surface: Surface | None = None
    ) -> tuple[Message, bool]:
        """The agent withdraws its own ask. A repeat changes nothing and returns
        changed=False."""
        return await self._end(actor, ask_id, EndingKind.WITHDRAWN_BY_AGENT, surface)

    async def withdraw_ask(
        self, actor: Actor, ask_id: str, *, surface: Surface | None = None
    ) -> tuple[Message, bool]:
        """The owner of the agent that asked withdraws its ask. A repeat changes
        nothing and returns changed=False."""
        return await self._end(actor, ask_id, EndingKind.WITHDRAWN_BY_OWNER, surface)

    async def _end(
        self,
        actor: Actor,
        ask_id: str,
        kind: EndingKind,
        surface: Surface | None,
        reason: str = "",
    ) -> tuple[Message, bool]:
        _check_ask_id(ask_id)
        row = await self._endings.write(
            {
                "cred": actor.credential,
                "actor": actor.account_id,
                "ask_id": ask_id,
                "kind": kind.value,
                "surface": surface.value if surface else None,
                "reason": reason,
            },
            len(reason),
        )
        result: dict[str, Any] = row["result"] if row else {"status": "not_found"}
        status = result["status"]
        if status not in ("changed", "unchanged", "recorded"):
            self._expired_instead(actor, result)
            raise refusal(status, ask_id)
        message = blockrules.message_from_json(result["ask_message"])
        if status == "changed":
            self._ended(kind.value, 1, message)
        return message, status != "unchanged"

    def _expired_instead(self, actor: Actor, result: dict[str, Any]) -> None:
        """An ending that came at or after the deadline expired the ask: its
        events and listeners are the expiry's, and its caller is refused."""
        if result["status"] != EndingKind.EXPIRED or "ask_message" not in result:
            return
        self._ended(
            EndingKind.EXPIRED.value, 1, blockrules.message_from_json(result["ask_message"])
        )

    # --- expiry ------------------------------------------------------------------

    async def expire_due_asks(self, batch: int = EXPIRY_BATCH) -> int:
        """Ends up to `batch` open asks whose deadline passed, in any workspace;
        returns how many. Safe to run from every server at once."""
        async with self.db.maintenance() as conn:
            cur = await conn.execute(ASKS["expire_due_asks"], {"batch": batch})
            row = await cur.fetchone()
        assert row is not None
        result: dict[str, Any] = row["result"]
        if result["expired"]:
            self._ended(EndingKind.EXPIRED.value, int(result["expired"]), None)
        return int(result["expired"])

    def _ended(self, kind: str, count: int, message: Message | None) -> None:
        for listener in self.ending_listeners:
            listener(kind, count, message)

    async def next_ask_deadline(self) -> datetime.datetime | None:
        """The nearest deadline of any open ask, in any workspace."""
        async with self.db.maintenance() as conn:
            row = await (await conn.execute(ASKS["next_ask_deadline"])).fetchone()
        return row["due"] if row else None

    # --- follow-ups ---------------------------------------------------------------

    async def take_follow_ups(self, batch: int = EXPIRY_BATCH) -> int:
        """Takes up to `batch` due follow-up steps (reminders, escalations) of
        open asks, in any workspace; returns how many. Safe to run from every
        server at once: each step is taken once, under its ask's row lock."""
        async with self.db.maintenance() as conn:
            cur = await conn.execute(ASKS["take_follow_ups"], {"batch": batch})
            row = await cur.fetchone()
        assert row is not None
        result: dict[str, Any] = row["result"]
        return int(result["steps"])

    async def next_follow_up(self) -> datetime.datetime | None:
        """When the nearest follow-up step of any ask is due."""
        async with self.db.maintenance() as conn:
            row = await (await conn.execute(ASKS["next_follow_up"])).fetchone()
        return row["due"] if row else None

    # --- the record --------------------------------------------------------------

    async def ask_history(self, actor: Actor, ask_id: str) -> AskHistory:
        """Who did what to the ask, oldest first, for anyone who can see it, and
        what the reader may do with it now."""
        _check_ask_id(ask_id)
        seen = await self._seen(actor, ask_id)
        async with self.db.tx(actor) as conn:
            cur = await conn.execute(ASKS["ask_history"], {"ask_id": ask_id})
            rows = await cur.fetchall()
        is_open = seen.ask.ending is None
        entries = [
            AskHistoryEntry(
                change=AskChange(r["kind"]),
                at=r["at"],
                actor_id=r["actor_id"],
                actor_handle=r["actor_handle"],
                surface=Surface(r["surface"]) if r["surface"] else None,
                reason=r["reason"],
                standing_answer_id=r["standing_answer_id"],
            )
            for r in rows
        ]
        ending = seen.ask.ending
        if (
            ending is not None
            and ending.kind is EndingKind.EXPIRED
            and ending.at is not None
            and all(e.change is not AskChange.EXPIRED for e in entries)
        ):
            # Past its deadline and not yet swept: recorded as it will be.
            entries.append(AskHistoryEntry(AskChange.EXPIRED, ending.at, surface=ending.surface))
        return AskHistory(
            ask_id=ask_id,
            entries=tuple(entries),
            may_answer=is_open
            and actor.kind is AccountKind.HUMAN
            and seen.may_answer
            and seen.ask.vote_of(actor.account_id) is None,
            may_withdraw=is_open and seen.owner_id == actor.account_id,
        )

    async def ask_trace(self, actor: Actor, ask_id: str) -> str:
        """The traceparent the ask was posted in ("" when untraced or unseen)."""
        cached = self._asks.get(ask_id)
        if cached is not None:
            return cached.trace
        try:
            return (await self._ask_state(actor, ask_id)).trace
        except StoreError:
            return ""
