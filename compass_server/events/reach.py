"""The channels one stream's account takes part in, kept as the stream reads
the log: those that it or an agent above it is a member of.

A stream starts from the store's participation, adds a channel when the log
shows its account or one of its chain joining, and reads participation
again when the log shows its account, or an agent above it, moving to
another parent: from that event on it hears the new chain's channels, and
no longer the old one's.
"""

from __future__ import annotations

import datetime
import uuid

from compass_server.store import Store
from compass_server.store.types import Actor, Event, EventKind, Participation


class Reach:
    def __init__(self, store: Store, actor: Actor, participation: Participation) -> None:
        self.store = store
        self.actor = actor
        self.chain: tuple[uuid.UUID, ...] = participation.chain
        # Each channel, and since when the account takes part in it.
        self.channels: dict[uuid.UUID, datetime.datetime | None] = dict(participation.channels)

    @classmethod
    async def of(cls, store: Store, actor: Actor) -> Reach:
        return cls(store, actor, await store.participation(actor))

    def moved(self, event: Event) -> bool:
        """The event moved this account or an agent above it: read again."""
        return event.moved is not None and event.moved.account_id in self.chain

    async def reload(self) -> None:
        participation = await self.store.participation(self.actor)
        self.chain = participation.chain
        self.channels = dict(participation.channels)

    def follow(self, event: Event) -> None:
        """A channel change naming one of the chain as a member: it is in reach
        from that event on."""
        if event.kind is not EventKind.CHANNEL_CHANGED or event.channel is None:
            return
        channel = event.channel
        if channel.channel_id not in self.channels and any(
            member in channel.member_ids for member in self.chain
        ):
            self.channels[channel.channel_id] = event.created_at

    def hears(self, event: Event) -> bool:
        """Whether an event of a channel reaches this account: it took part in
        the channel by the time of the event. A replay after a move holds
        nothing of the new chain's channels from before it. The one rule of
        Subscribe streams and relay lanes."""
        self.follow(event)
        channel_id = event.channel_id
        return channel_id is not None and self.heard_since(channel_id, event.created_at)

    def heard_since(self, channel_id: uuid.UUID, at: datetime.datetime | None) -> bool:
        """In reach at `at` (None: whenever): the account took part by then."""
        if channel_id not in self.channels:
            return False
        since = self.channels[channel_id]
        return at is None or since is None or at >= since
