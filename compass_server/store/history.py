"""Checking the hash chain of a workspace's ask history.

Every entry of an ask's history commits to the entry before it and to the
ask as it stood after the change (migration 0026). The check recomputes
every entry's hash from its fields and the stored hash before it, in the
database with the function that wrote it, and names the first entry that
doesn't hold: an entry edited in place, or the one after an entry removed.
It also names an ask that no longer stands as its last entry recorded (its
ending entry removed, or the ask itself rewritten) and an ask left with no
entry at all.

The chain shows edits by anyone who doesn't recompute it. Someone who can
rewrite the table can recompute it too: what holds against them is the
receipts agents keep, signed with a key the database never sees.
"""

from __future__ import annotations

import dataclasses
import datetime
import uuid

from compass_server.store.db import Database, queries

HISTORY = queries("history")


@dataclasses.dataclass(frozen=True, slots=True)
class Altered:
    """The first entry of a workspace's history that doesn't hold."""

    ask_id: str
    # None for an ask left with no entry at all.
    entry_id: int | None
    kind: str | None
    at: datetime.datetime | None
    why: str


@dataclasses.dataclass(frozen=True, slots=True)
class HistoryCheck:
    entries: int
    asks: int
    altered: Altered | None

    @property
    def holds(self) -> bool:
        return self.altered is None


async def check_history(db: Database, workspace_id: uuid.UUID) -> HistoryCheck:
    """Walks the workspace's history, oldest entry first."""
    async with db.maintenance() as conn:
        cur = await conn.execute(HISTORY["check"], {"ws": workspace_id})
        rows = await cur.fetchall()
    altered: Altered | None = None
    asks: set[str] = set()
    entries = 0
    for r in rows:
        asks.add(r["ask_id"])
        if r["id"] is None:
            why = "its history is gone: every entry of this ask was removed"
        else:
            entries += 1
            if not r["holds"]:
                why = (
                    "this entry doesn't hold: it was altered, or an entry of the same ask "
                    "before it was altered or removed"
                )
            elif not r["state_holds"]:
                why = (
                    "the ask no longer stands as this entry, its last, recorded: an entry "
                    "after it was removed, or the ask was rewritten"
                )
            else:
                continue
        if altered is None:
            altered = Altered(r["ask_id"], r["id"], r["kind"], r["at"], why)
    return HistoryCheck(entries, len(asks), altered)
