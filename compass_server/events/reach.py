"""The channels one stream's account takes part in, kept as the stream reads
the log: those that it or an agent above it is a member of.

A stream starts from the store's participation, adds a channel when the log
shows its account or one of its chain joining, and reads participation
again when the log shows its account, or an agent above it, moving to
another parent: from that event on it hears the new chain's channels, and
no longer the old one's.

What a stream hears by (its chain and channels, and the set of keys the
event hub files a waiting lane under) is held once per distinct set however
many streams and relay sessions hold it (an account may be in thousands of
channels, and a runner may bind hundreds of sessions of one agent): the
streams of an account share what the store read, and streams that saw the
same channel joined share what that made.
"""

from __future__ import annotations

import datetime
import uuid
import weakref
from collections.abc import Collection, Iterable, Mapping

from compass_server.store import Store
from compass_server.store.types import Actor, Event, EventKind, Participation

# Presence keys are ids with these bits flipped: a key of their own for the
# same agent or channel, never an id itself.
_PRESENCE_BITS = 0x6A09_E667_F3BC_C908_B2FB_1366_EA95_7D3E
# Sets of agents heard besides one participation's channels, kept made.
HEARD_SETS = 16


def presence_key(key: uuid.UUID) -> uuid.UUID:
    """What a lane hearing the presence of an agent, or of the agents taking
    part in a channel, is filed under (events.hub)."""
    return uuid.UUID(int=key.int ^ _PRESENCE_BITS)


class Shared:
    """One account's participation, shared by its streams; never changed
    once made."""

    __slots__ = ("__weakref__", "_heard", "_joins", "_keys", "chain", "channels")

    def __init__(
        self,
        chain: tuple[uuid.UUID, ...],
        channels: Mapping[uuid.UUID, datetime.datetime | None],
    ) -> None:
        self.chain = chain
        self.channels = channels
        self._keys: frozenset[uuid.UUID] | None = None
        self._heard: dict[frozenset[uuid.UUID], frozenset[uuid.UUID]] | None = None
        # What joining one more channel made of this, for the streams that
        # see the same join: (channel, since) → the participation with it.
        self._joins: weakref.WeakValueDictionary[
            tuple[uuid.UUID, datetime.datetime | None], Shared
        ] = weakref.WeakValueDictionary()

    @property
    def keys(self) -> frozenset[uuid.UUID]:
        """What an event must name to be heard (see events.hub.event_keys):
        a channel in reach, or an account of the chain."""
        if self._keys is None:
            self._keys = frozenset((*self.chain, *self.channels))
        return self._keys

    def heard(self, agents: frozenset[uuid.UUID]) -> frozenset[uuid.UUID]:
        """`keys`, and the presence keys of the channels and of `agents`: made
        once for every Subscribe stream of the account that hears the same."""
        if self._heard is None:
            self._heard = {}
        found = self._heard.get(agents)
        if found is None:
            if len(self._heard) >= HEARD_SETS:
                del self._heard[next(iter(self._heard))]
            found = frozenset(
                (
                    *self.keys,
                    *(presence_key(c) for c in self.channels),
                    *(presence_key(a) for a in agents),
                )
            )
            self._heard[agents] = found
        return found

    def joined(self, channel_id: uuid.UUID, since: datetime.datetime | None) -> Shared:
        """This and one more channel, in reach from `since`; made once for
        every stream that sees the same join."""
        join = (channel_id, since)
        found = self._joins.get(join)
        if found is None:
            found = Shared(self.chain, {**self.channels, channel_id: since})
            self._joins[join] = found
        return found


class Participations:
    """The participation each account's open streams hold, kept while any
    holds it: a stream that reads the same as one already held takes that."""

    def __init__(self, store: Store) -> None:
        self.store = store
        self._held: weakref.WeakValueDictionary[uuid.UUID, Shared] = weakref.WeakValueDictionary()

    def __len__(self) -> int:
        return len(self._held)

    async def read(self, actor: Actor) -> Shared:
        return self.share(await self.store.participation(actor))

    def share(self, participation: Participation) -> Shared:
        """The participation as held, or held from now on."""
        held = self._held.get(participation.account_id)
        if (
            held is not None
            and held.chain == participation.chain
            and held.channels == participation.channels
        ):
            return held
        shared = Shared(participation.chain, participation.channels)
        self._held[participation.account_id] = shared
        return shared


class Reach:
    def __init__(self, participations: Participations, actor: Actor, shared: Shared) -> None:
        self.participations = participations
        self.actor = actor
        self._shared = shared
        # Moves on whenever `keys` would answer differently.
        self.version = 0

    @classmethod
    async def of(
        cls, participations: Participations, actor: Actor, read: Participation | None = None
    ) -> Reach:
        """The actor's reach, from a participation just read if given."""
        if read is not None:
            return cls(participations, actor, participations.share(read))
        return cls(participations, actor, await participations.read(actor))

    @property
    def chain(self) -> tuple[uuid.UUID, ...]:
        return self._shared.chain

    @property
    def shared(self) -> Shared:
        return self._shared

    @property
    def channels(self) -> Mapping[uuid.UUID, datetime.datetime | None]:
        """The channels in reach, each since when."""
        return self._shared.channels

    def moved(self, event: Event) -> bool:
        """The event moved this account or an agent above it: read again."""
        return event.moved is not None and event.moved.account_id in self.chain

    async def reload(self) -> None:
        self._shared = await self.participations.read(self.actor)
        self.version += 1

    def keys(self) -> frozenset[uuid.UUID]:
        """What an event must name to be heard (see events.hub.event_keys),
        as one set shared with every stream that hears the same."""
        return self._shared.keys

    def follow(self, event: Event) -> None:
        """A channel change naming one of the chain as a member: it is in reach
        from that event on."""
        if event.kind is not EventKind.CHANNEL_CHANGED or event.channel is None:
            return
        channel = event.channel
        if channel.channel_id not in self._shared.channels and any(
            member in channel.member_ids for member in self.chain
        ):
            self._shared = self._shared.joined(channel.channel_id, event.created_at)
            self.version += 1

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
        channels = self._shared.channels
        if channel_id not in channels:
            return False
        since = channels[channel_id]
        return at is None or since is None or at >= since


_NONE: frozenset[uuid.UUID] = frozenset()


class Heard:
    """What a Subscribe stream hears by (events.hub.Interest): its reach, the
    presence of the agents taking part in its channels, and the presence of
    the agents it names besides (those whose inbox it hears, those it asked
    for)."""

    __slots__ = ("_added", "_agents", "_keys", "_keys_version", "reach")

    def __init__(self, reach: Reach, agents: Iterable[uuid.UUID]) -> None:
        self.reach = reach
        # The one empty set, not one per stream.
        self._agents = frozenset(agents) or _NONE
        self._added = 0
        self._keys: frozenset[uuid.UUID] = frozenset()
        self._keys_version = -1

    @property
    def version(self) -> int:
        return (self.reach.version << 32) + self._added

    def add(self, agent_id: uuid.UUID) -> None:
        """Hears this agent's presence from now on."""
        if agent_id not in self._agents:
            self._agents = self._agents | {agent_id}
            self._added += 1

    def channels(self) -> Collection[uuid.UUID]:
        return self.reach.channels.keys()

    def keys(self) -> frozenset[uuid.UUID]:
        version = self.version
        if version != self._keys_version:
            self._keys = self.reach.shared.heard(self._agents)
            self._keys_version = version
        return self._keys
