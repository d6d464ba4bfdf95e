"""The store every surface calls: one object made of one room per aggregate.

Each room (accounts.py, channels.py, messages.py, posts.py, asks.py, presence.py,
sessions.py, events.py, people.py, links.py, ...) holds how its noun is stored
and its rules; Store joins them and owns what they share (the database, the
ask cache and the coalesced writers)."""

from __future__ import annotations

from collections.abc import Callable

from compass_server.store import blocks as blockrules
from compass_server.store.accounts import Accounts
from compass_server.store.admin import AdminStore
from compass_server.store.asks import ASK_CACHE_BYTES, ASKS, AskCache, AskEndings, ending_item
from compass_server.store.channels import CHANNELS_PER_ACCOUNT, Channels
from compass_server.store.coalesce import WRITE_BATCH, Coalescer
from compass_server.store.db import Database
from compass_server.store.events import EventLog
from compass_server.store.follow_up_defaults import FollowUpDefaults
from compass_server.store.ids import parse_id
from compass_server.store.links import AskLinks
from compass_server.store.messages import Messages
from compass_server.store.people import People
from compass_server.store.posts import Posts, post_writes
from compass_server.store.presence import PresenceStore
from compass_server.store.replies import MailReplies
from compass_server.store.sessions import Sessions
from compass_server.store.types import FollowUp

__all__ = ["Store", "parse_id"]


class Store(
    AskEndings,
    People,
    AskLinks,
    MailReplies,
    Posts,
    Accounts,
    Channels,
    Messages,
    PresenceStore,
    Sessions,
    EventLog,
    FollowUpDefaults,
):
    def __init__(
        self,
        db: Database,
        *,
        ask_cache_bytes: int = ASK_CACHE_BYTES,
        deadline_bounds: blockrules.DeadlineBounds = blockrules.DEADLINE_BOUNDS,
        write_batch: int = WRITE_BATCH,
    ) -> None:
        """`write_batch`: posts (or ask endings) sent as one statement at most;
        1 sends each alone."""
        self.db = db
        self.admin = AdminStore(db)
        self.channels_per_account = CHANNELS_PER_ACCOUNT
        self._asks = AskCache(ask_cache_bytes)
        self.deadline_bounds = deadline_bounds
        # Each ask posted without a follow-up policy gets this one.
        self.follow_up_default: FollowUp | None = None
        self.deadline_listeners = []
        self.ending_listeners = []
        self.write_listeners: list[Callable[[str, int], None]] = []
        self._posts = post_writes(
            db, max_items=write_batch, observe=lambda n: self._wrote("post", n)
        )
        self._endings = Coalescer(
            db,
            single=lambda p: ASKS["answer_ask"] if "answered" in p else ASKS["end_ask"],
            batch=ASKS["end_asks"],
            column="result",
            encode=ending_item,
            max_items=write_batch,
            observe=lambda n: self._wrote("ending", n),
        )

    def _wrote(self, kind: str, count: int) -> None:
        for listener in self.write_listeners:
            listener(kind, count)
