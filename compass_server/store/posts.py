"""A post, and never the same ask twice.

A post may carry a client key, the author's name for one logical post: the
same key again (a retry after a dropped connection, an agent restarted
mid-call) returns the message that key posted, as it is now, and posts
nothing; the same key with a different post is ALREADY_EXISTS. A post of
exactly one ask is also looked up by what people see of it: when its
author has an identical ask open in the same channel, that ask's message
comes back instead of a second one, unless the post allows it.

Identical means the same print (`ask_print`): the message's text blocks in
order, and the same questions in the same order, each with the same
question text, header, multiplicity and options (the same labels,
descriptions and previews, in the same order), the same named answerers,
and the same quorum (how many must answer, and whether a decline counts
against it). Ids, recommendations and deadlines are not compared: an agent
restarted mid-call mints its own ids and a deadline from its own clock.

Both lookups and the post run in one statement (compass_posts_once,
migration 0026) under the author's row lock, so retries racing each other
post once.
"""

from __future__ import annotations

import dataclasses
import datetime
import enum
import hashlib
import json
import uuid
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

from psycopg.types.json import Jsonb

from compass_server.store import blocks as blockrules
from compass_server.store.coalesce import Coalescer
from compass_server.store.db import Database, queries, signed_out
from compass_server.store.errors import Conflict, InvalidArgument, NotFound
from compass_server.store.types import (
    Actor,
    AlwaysOption,
    Ask,
    AskQuestion,
    Block,
    FollowUp,
    Message,
    Surface,
    TextBlock,
)
from compass_server.telemetry.traces import traceparent_of

POSTS = queries("posts")
MESSAGES = queries("messages")

# The longest client key, in characters.
MAX_CLIENT_KEY_CHARS = 128


class PostOutcome(enum.StrEnum):
    POSTED = "posted"
    # The post's client key posted this message before.
    REPEATED = "repeated"
    # An identical ask of the author's is open in the channel: its message.
    ALREADY_OPEN = "already_open"


@dataclasses.dataclass(frozen=True, slots=True)
class Posted:
    message: Message
    outcome: PostOutcome


def _canonical(value: Any) -> bytes:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()


def _seen(q: AskQuestion) -> dict[str, Any]:
    """What people see of a question."""
    return {
        "question": q.question,
        "header": q.header,
        "multiple": q.allow_multiple,
        "options": [[o.label, o.description, o.preview] for o in q.options],
    }


def ask_print(blocks: Sequence[Block]) -> bytes | None:
    """The print of a post of exactly one ask (None for any other post): two
    posts are identical exactly when their prints are equal."""
    asks = [b for b in blocks if isinstance(b, Ask)]
    if len(asks) != 1:
        return None
    ask = asks[0]
    seen = {
        "text": [b.text for b in blocks if isinstance(b, TextBlock)],
        "questions": [_seen(q) for q in ask.questions],
        "answerers": sorted(str(a) for a in ask.answerer_ids),
        **_quorum(ask),
    }
    return hashlib.sha256(_canonical(seen)).digest()


def _quorum(ask: Ask) -> dict[str, Any]:
    """A quorum ask's terms; nothing for any other ask, whose prints (kept
    for open asks) stay as they were before quorums."""
    if not ask.quorum:
        return {}
    return {"quorum": ask.quorum, "declines_count_against": ask.declines_count_against_quorum}


def _block_as_sent(b: Block) -> Any:
    if isinstance(b, TextBlock):
        return {"text": b.text}
    if not isinstance(b, Ask):
        return {"other": True}
    return {
        "questions": [
            {
                **_seen(q),
                "id": q.question_id,
                "option_ids": [o.id for o in q.options],
                "recommended": q.recommended,
            }
            for q in b.questions
        ],
        "deadline": b.deadline.isoformat() if b.deadline else None,
        "timeout": b.timeout.total_seconds() if b.timeout else None,
        "answerers": [str(a) for a in b.answerer_ids],
        **_quorum(b),
    }


def post_digest(channel_id: uuid.UUID, blocks: Sequence[Block]) -> bytes:
    """What a keyed post said, as its client sent it (a timeout, not the
    deadline it makes), so a retry of the same post has the same digest."""
    return hashlib.sha256(
        _canonical({"channel": str(channel_id), "blocks": [_block_as_sent(b) for b in blocks]})
    ).digest()


def check_client_key(key: str) -> None:
    if len(key) > MAX_CLIENT_KEY_CHARS:
        raise InvalidArgument(
            f"client_key has {len(key)} characters; the limit is {MAX_CLIENT_KEY_CHARS}"
        )


def _item(p: dict[str, Any]) -> dict[str, Any]:
    """A post's parameters as an item of compass_posts_once."""
    item = {
        "cred": p["cred"].hex(),
        "id": str(p["id"]),
        "channel_id": str(p["channel_id"]),
        "author_id": str(p["author_id"]),
        "blocks": p["blocks"].obj,
        "search_text": p["search_text"],
        "ask_ids": p["ask_ids"],
        "due": [d.isoformat() if d is not None else None for d in p["due"]],
        "surface": p["surface"],
    }
    if p["client_key"]:
        item["client_key"] = p["client_key"]
        item["digest"] = p["digest"].hex()
    if p["print"] is not None:
        item["print"] = p["print"].hex()
    return item


def post_writes(
    db: Database, *, max_items: int, observe: Callable[[int], None] | None = None
) -> Coalescer:
    """Posts written together: a lone post that asks nothing to look up goes
    straight to compass_post_message; everything else through
    compass_posts_once."""
    return Coalescer(
        db,
        single=lambda p: POSTS["post_once"] if "item" in p else MESSAGES["post_message"],
        batch=POSTS["posts_once"],
        column="message",
        encode=lambda p: p["item"].obj if "item" in p else _item(p),
        max_items=max_items,
        observe=observe,
    )


class Posts:
    """Posting, mixed into Store."""

    db: Database
    _posts: Coalescer
    deadline_bounds: blockrules.DeadlineBounds
    follow_up_default: FollowUp | None

    # AskEndings' (see asks.py).
    _name_answerers: Callable[[Actor, uuid.UUID, Sequence[Block]], Awaitable[list[Block]]]
    _posted: Callable[[Message, Sequence[int]], None]

    async def post(
        self,
        actor: Actor,
        channel_id: uuid.UUID,
        blocks: Sequence[Block],
        *,
        surface: Surface | None = None,
        client_key: str = "",
        allow_identical: bool = False,
        always: AlwaysOption | None = None,
    ) -> Posted:
        """Posts blocks as the actor, or returns the message this post is
        already (its client key's, or an identical open ask's). Mints one
        ask_id per ask block, settles each ask's deadline and checks its
        answerers, and drops any inbound server-owned ask state; refuses
        ask_answer blocks. `always` (the server's own posts only) names the
        option of its asks whose choice is also a standing answer."""
        check_client_key(client_key)
        stored, ask_ids = blockrules.prepare_for_append(
            blocks, bounds=self.deadline_bounds, follow_up_default=self.follow_up_default
        )
        stored = await self._name_answerers(actor, channel_id, stored)
        blocks_json = blockrules.blocks_to_json(stored)
        sizes = blockrules.check_message_size(blocks_json)
        # Kept after the size check: tracing never turns a message away.
        # An ask sent without a policy takes its channel's or workspace's
        # default, if either has one, at the insert (migration 0036).
        for block, sent in zip(blocks_json, blocks, strict=True):
            if isinstance(sent, Ask) and sent.follow_up is None:
                block["ask"]["follow_up_inherit"] = True
        if always is not None:
            for block in blocks_json:
                if block["kind"] == "ask":
                    block["ask"]["always"] = blockrules.always_to_json(always)
        posted_in = traceparent_of()
        if posted_in:
            for block in blocks_json:
                if block["kind"] == "ask":
                    block["ask"]["trace"] = posted_in
        params: dict[str, Any] = {
            "cred": actor.credential,
            "id": uuid.uuid4(),
            "channel_id": channel_id,
            "author_id": actor.account_id,
            "blocks": Jsonb(blocks_json),
            "search_text": blockrules.search_text(stored),
            "ask_ids": ask_ids,
            "due": [b.deadline for b in stored if isinstance(b, Ask)],
            "surface": surface.value if surface else None,
            "client_key": client_key,
            "digest": post_digest(channel_id, blocks) if client_key else b"",
            "print": None if allow_identical else ask_print(stored),
        }
        if client_key or params["print"] is not None:
            params["item"] = Jsonb(_item(params))
        row = await self._posts.write(params, sum(sizes))
        result = row["message"] if row is not None else None
        if result is not None and result.get("unscoped"):
            raise signed_out()
        if result is None or ("message" not in result and "key_reused" not in result):
            raise NotFound(f"no channel {channel_id}")
        if "key_reused" in result:
            raise Conflict(
                f"client_key {client_key!r} was used by message {result['key_reused']} for "
                "a different post; use a new key for a new post"
            )
        outcome = PostOutcome(result.get("outcome", PostOutcome.POSTED))
        message = blockrules.message_from_json(result["message"])
        if outcome is not PostOutcome.POSTED:
            read_at = datetime.datetime.fromisoformat(result["read_at"])
            message = dataclasses.replace(
                message, blocks=blockrules.blocks_as_of(message.blocks, read_at)
            )
            return Posted(message, outcome)
        self._posted(message, sizes)
        return Posted(message, outcome)

    async def append_message(
        self,
        actor: Actor,
        channel_id: uuid.UUID,
        blocks: Sequence[Block],
        *,
        surface: Surface | None = None,
    ) -> Message:
        """Posts blocks as the actor (see Posts.post), even an ask identical to
        an open one: the surfaces look those up (a post says whether)."""
        posted = await self.post(actor, channel_id, blocks, surface=surface, allow_identical=True)
        return posted.message
