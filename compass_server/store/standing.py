"""Standing answers: "answer this the same way from now on".

A person makes one with an answer (RespondToAsk's `standing`, written in the
answer's own transaction by compass_answer_ask, migration 0025). From then
until it expires or is revoked, an ask posted by the same agent (or, when it
includes sub-agents, by an agent below it) whose every question is one of
the rule's is answered at its post, inside the post's transaction, for that
person and attributed to the rule. People list and revoke their own; an
admin lists a workspace's.
"""

from __future__ import annotations

import datetime
import uuid
from collections.abc import Sequence
from typing import Any

from compass_server.store import blocks as blockrules
from compass_server.store.admin import AdminStore, Asker
from compass_server.store.db import Conn, Database, queries
from compass_server.store.errors import InvalidArgument, NotFound
from compass_server.store.types import AccountKind, Actor, StandingAnswer, StandingTerms

STANDING = queries("standing")

# How long a standing answer may stand, at least and at most.
STANDING_ANSWER_MIN = datetime.timedelta(minutes=1)
STANDING_ANSWER_MAX = datetime.timedelta(days=30)
# Standing answers one person may have in force at once.
STANDING_ANSWERS_PER_PERSON = 100
# One listing returns at most this many.
MAX_STANDING_LISTED = 500


def _standing(row: dict[str, Any], uses: dict[uuid.UUID, int]) -> StandingAnswer:
    return StandingAnswer(
        standing_answer_id=row["id"],
        account_id=row["account_id"],
        handle=row["handle"],
        agent_id=row["agent_id"],
        agent_handle=row["agent_handle"],
        include_subagents=row["include_subagents"],
        questions=tuple(blockrules.question_from_json(q) for q in row["questions"]),
        made_from_ask_id=row["made_from_ask_id"],
        created_at=row["created_at"],
        expires_at=row["expires_at"],
        revoked_at=row["revoked_at"],
        asks_answered=uses.get(row["id"], 0),
    )


async def _with_uses(conn: Conn, rows: Sequence[dict[str, Any]]) -> list[StandingAnswer]:
    if not rows:
        return []
    cur = await conn.execute(STANDING["uses"], {"ids": [r["id"] for r in rows]})
    uses = {r["standing_answer_id"]: int(r["uses"]) for r in await cur.fetchall()}
    return [_standing(r, uses) for r in rows]


class StandingAnswers:
    """The store's standing answers. Mixed into Store."""

    db: Database
    admin: AdminStore
    standing_shortest: datetime.timedelta = STANDING_ANSWER_MIN
    standing_longest: datetime.timedelta = STANDING_ANSWER_MAX
    standing_per_person: int = STANDING_ANSWERS_PER_PERSON

    def standing_terms(self, terms: StandingTerms | None) -> dict[str, Any] | None:
        """What compass_answer_ask takes to make a standing answer; refuses a
        duration outside the bounds."""
        if terms is None:
            return None
        if not self.standing_shortest <= terms.duration <= self.standing_longest:
            raise InvalidArgument(
                f"a standing answer stands {blockrules.span(self.standing_shortest)} to "
                f"{blockrules.span(self.standing_longest)}"
            )
        return {
            "id": str(uuid.uuid4()),
            "seconds": terms.duration.total_seconds(),
            "include_subagents": terms.include_subagents,
            "most": self.standing_per_person,
        }

    async def standing_answer(self, actor: Actor, standing_answer_id: uuid.UUID) -> StandingAnswer:
        """One of the actor's own standing answers."""
        async with self.db.tx(actor) as conn:
            row = await (
                await conn.execute(
                    STANDING["get"], {"id": standing_answer_id, "account_id": actor.account_id}
                )
            ).fetchone()
            if row is None:
                raise NotFound(f"no standing answer {standing_answer_id}")
            (found,) = await _with_uses(conn, [row])
        return found

    async def list_standing_answers(
        self, actor: Actor, include_ended: bool = False
    ) -> list[StandingAnswer]:
        """The actor's own, newest first; an agent has none."""
        if actor.kind is not AccountKind.HUMAN:
            return []
        async with self.db.tx(actor) as conn:
            cur = await conn.execute(
                STANDING["listed"],
                {
                    "account_id": actor.account_id,
                    "include_ended": include_ended,
                    "limit": MAX_STANDING_LISTED,
                },
            )
            return await _with_uses(conn, await cur.fetchall())

    async def revoke_standing_answer(
        self, actor: Actor, standing_answer_id: uuid.UUID
    ) -> StandingAnswer:
        """From the commit on it answers nothing. Someone else's is NOT_FOUND;
        a repeat, or one that expired, changes nothing."""
        async with self.db.tx(actor) as conn:
            params = {"id": standing_answer_id, "account_id": actor.account_id}
            await conn.execute(STANDING["revoke"], params)
            row = await (await conn.execute(STANDING["get"], params)).fetchone()
            if row is None:
                raise NotFound(f"no standing answer {standing_answer_id}")
            (found,) = await _with_uses(conn, [row])
        return found

    async def workspace_standing_answers(
        self, by: Asker, account_id: uuid.UUID | None = None, include_ended: bool = False
    ) -> list[StandingAnswer]:
        """An admin's (or the operator's) view: the workspace's, newest first."""
        async with self.db.tx(by) as conn:
            await self.admin.admit(conn, by)
            cur = await conn.execute(
                STANDING["listed"],
                {
                    "account_id": account_id,
                    "include_ended": include_ended,
                    "limit": MAX_STANDING_LISTED,
                },
            )
            return await _with_uses(conn, await cur.fetchall())
