"""One LISTEN connection per process wakes a feed per workspace; every
subscriber of that workspace pulls from the feed's shared window of recent
events, or from the log itself when it is further behind.

Subscribers pull, nothing is pushed into per-subscriber queues. A stream
reading the window takes one shared event at a time; a stream behind it reads
the log a page at a time, each page bounded in bytes and paid for from one
replay budget shared by every stream of the process, and hands the bytes back
as its client takes the events. A stream whose client stops reading holds a
cursor and at most one page.

A stream that hears only some events (a relay lane: its agent's channels,
inbox and chain) waits in the feed's index under the keys it hears by, and a
new event wakes only the waiting streams its keys name: an event costs work
for the lanes that may hear it, not for every stream of the workspace. One
re-check per feed, not per stream, catches a missed notification.

Presence is heard the same way, by keys the log does not store: an agent's
change is filed under the agent's presence key, its owner's id and the
presence keys of the channels it takes part in (a member, or under an agent
that is one), as the feed knows their members; a Subscribe stream waits under
its account, its channels and their presence keys.
A stream that is behind skips a change a later one of the same agent
supersedes: it gets each agent's latest state, not every step.
"""

from __future__ import annotations

import asyncio
import bisect
import collections
import contextlib
import functools
import logging
import uuid
from collections.abc import AsyncGenerator, Awaitable, Callable, Collection, Iterable
from typing import Protocol, TypeVar

import psycopg

from compass_server.events.reach import Participations, presence_key
from compass_server.store import Store, Unauthenticated
from compass_server.store.db import unshared
from compass_server.store.types import Event, EventKind, Scope

log = logging.getLogger(__name__)
T = TypeVar("T")

CHANNEL = "compass_events"
# The shared window of recent events per workspace with subscribers, bounded
# by count and by payload bytes.
WINDOW = 4096
WINDOW_BYTES = 16 << 20
# One read of the log: at most this many events, and this many payload bytes
# (a single larger event still makes a page of one).
BATCH = 500
PAGE_BYTES = 1 << 20
# Pages of the log held by all streams of the process at once, and by the
# streams of one account or runner: a client that stops reading can't hold
# more than its share, so it never stalls another's replay.
REPLAY_BYTES = 64 << 20
REPLAY_BYTES_PER_TOKEN = 8 << 20
# Pages of the log read from the database at once by all streams of the
# process: when thousands of lanes catch up together (a restart), the rest
# wait here rather than take every pooled connection from the writes.
REPLAY_READS = 8
# Lanes asked about in one read of the log.
PROBE_BATCH = 200
# A lane with more keys than this steps through the window event by event
# rather than looking each key up.
JUMP_KEYS = 64
# A missed NOTIFY (a dropped listener) is caught up by this re-check.
RECHECK_SECONDS = 5.0


def event_keys(event: Event) -> list[uuid.UUID]:
    """What an event is about, as the feed's index finds waiting lanes by:
    its channel, the agent whose inbox it changes, the author of an updated
    message (an ask's ending reaches its author), the agent it moves, and
    the members of a channel it changes (a lane follows its chain into
    channels it joins). compass_event_keys (migration 0039) keeps the same
    keys with each event for lanes' reads; tests/test_lane_reads.py holds
    the two to each other for every kind of event."""
    keys = []
    if event.channel_id is not None:
        keys.append(event.channel_id)
    if event.inbox is not None:
        keys.append(event.inbox.agent_id)
    if event.kind is EventKind.MESSAGE_UPDATED and event.message is not None:
        keys.append(event.message.author_id)
    if event.moved is not None:
        keys.append(event.moved.account_id)
    if event.channel is not None:
        keys.extend(event.channel.member_ids)
    return keys


class Interest(Protocol):
    """What a lane may hear, by the keys of `event_keys`: its channels and
    the accounts of its chain. `version` changes whenever `keys` would.
    Lanes that hear the same keys hold one set of them (events.reach), and
    the feed files them under it once."""

    @property
    def version(self) -> int: ...

    def keys(self) -> frozenset[uuid.UUID]: ...


class Lane:
    """A stream that hears only events naming one of its interest's keys;
    every other event it may pass without looking at it.

    `presence`, when given, is the channels whose agents' presence the lane
    hears (its interest holds their presence keys, and those of any agent it
    hears besides): the feed learns their members, and the lane skips a
    change a later one of the same agent supersedes. The log stores no
    presence keys, so behind the window such a lane reads the log whole."""

    __slots__ = ("interest", "presence", "reader", "went")

    def __init__(
        self,
        interest: Interest,
        presence: Callable[[], Collection[uuid.UUID]] | None = None,
    ) -> None:
        self.interest = interest
        self.presence = presence
        self.reader: Reader | None = None
        # Where its last wait left it, kept past the stream's end (a stop
        # cancels the lane before it unbinds).
        self.went = -1

    def passed(self) -> int:
        """Every event up to this id was none of the lane's, as far as its
        waits tell (-1 when none has)."""
        reader = self.reader
        if reader is not None and reader.parked:
            return max(self.went, reader.position())
        return self.went


class Closed(Exception):
    """The hub is shutting down; streams end."""


class Budget:
    """Bytes handed out in turn, within a total and within each owner's share;
    a taker waits until enough are back. A request over a bound is served
    alone.

    Takers wait in one queue per owner, so that handing bytes back (once per
    event a stream takes) costs the owners waiting, not the takers."""

    def __init__(self, total: int, per_owner: int) -> None:
        self.total = total
        self.per_owner = per_owner
        self.used = 0
        self.owners: collections.Counter[uuid.UUID] = collections.Counter()
        self._queues: dict[uuid.UUID, collections.deque[_Turn]] = {}
        self._turns = 0

    def _fits_total(self, n: int) -> bool:
        return self.used == 0 or self.used + n <= self.total

    def _fits_share(self, owner: uuid.UUID, n: int) -> bool:
        mine = self.owners[owner]
        return mine == 0 or mine + n <= self.per_owner

    def _grant(self, owner: uuid.UUID, n: int) -> None:
        self.used += n
        self.owners[owner] += n

    async def take(self, owner: uuid.UUID, n: int) -> None:
        self._turns += 1
        turn = _Turn(self._turns, n, asyncio.get_running_loop().create_future())
        self._queues.setdefault(owner, collections.deque()).append(turn)
        self._serve()
        try:
            await turn.granted
        except BaseException:
            if turn.granted.done() and not turn.granted.cancelled():
                self.give(owner, n)  # granted just as we were cancelled
            else:
                queue = self._queues.get(owner)
                if queue is not None and turn in queue:
                    queue.remove(turn)
                    if not queue:
                        del self._queues[owner]
                self._serve()
            raise

    def force(self, owner: uuid.UUID, n: int) -> None:
        """Takes without waiting: for the excess of an event over its page."""
        self._grant(owner, n)

    def give(self, owner: uuid.UUID, n: int) -> None:
        self.used -= n
        self.owners[owner] -= n
        if self.owners[owner] <= 0:
            del self.owners[owner]
        if self._queues:
            self._serve()

    def _serve(self) -> None:
        # In order of arrival; one over its owner's share waits without
        # holding up the rest, one short of the total holds up everyone after.
        blocked: set[uuid.UUID] = set()
        while True:
            first: tuple[int, uuid.UUID] | None = None
            for owner, queue in self._queues.items():
                while queue and queue[0].granted.done():
                    queue.popleft()  # cancelled; its taker has yet to run
                if queue and owner not in blocked and (first is None or queue[0].seq < first[0]):
                    first = (queue[0].seq, owner)
            for owner in [o for o, q in self._queues.items() if not q]:
                del self._queues[owner]
            if first is None:
                return
            owner = first[1]
            turn = self._queues[owner][0]
            if not self._fits_total(turn.n):
                return
            if not self._fits_share(owner, turn.n):
                blocked.add(owner)
                continue
            self._queues[owner].popleft()
            self._grant(owner, turn.n)
            turn.granted.set_result(None)


class _Turn:
    __slots__ = ("granted", "n", "seq")

    def __init__(self, seq: int, n: int, granted: asyncio.Future[None]) -> None:
        self.seq = seq
        self.n = n
        self.granted = granted


class _Ids:
    """Ascending event ids, taken from the front as the window lets events go."""

    __slots__ = ("ids", "start")

    def __init__(self) -> None:
        self.ids: list[int] = []
        self.start = 0

    def after(self, event_id: int) -> int | None:
        i = bisect.bisect_right(self.ids, event_id, self.start)
        return self.ids[i] if i < len(self.ids) else None

    def drop_first(self) -> bool:
        """Lets the first id go; True when none is left."""
        self.start += 1
        if self.start >= len(self.ids):
            return True
        if self.start > 64 and self.start * 2 > len(self.ids):
            del self.ids[: self.start]
            self.start = 0
        return False


class Feed:
    """The recent events of one workspace, loaded once for all its subscribers."""

    def __init__(
        self, store: Store, scope: Scope, head: int, window_bytes: int, page_bytes: int
    ) -> None:
        self.store = store
        self.workspace_id = scope.workspace_id
        # Whose credential the feed reads the log with: its latest subscriber's
        # that still signs in (a revoked or expired one scopes nothing; its own
        # streams end, the others read on with another's).
        self.scope = scope
        # The streams' scopes, each with how many streams joined with it: a
        # workspace may have thousands of streams, each joining and leaving.
        self._scopes: dict[Scope, int] = {}
        self._stale: set[Scope] = set()
        self.head = head
        self.window: collections.deque[Event] = collections.deque()
        # The window's event ids by the keys that name them (event_keys):
        # a lane catching up inside the window goes from one of its own to
        # the next, not through everyone's in between.
        self._named: dict[uuid.UUID, _Ids] = {}
        self.window_bytes = 0
        self.max_window_bytes = window_bytes
        self.page_bytes = page_bytes
        self.users = 0
        self._changed = asyncio.Event()
        self._loading: asyncio.Task[None] | None = None
        self._wanted = head
        self.closed = False
        # Waiting lanes in groups by the set of keys they hear by (one group
        # for the sessions of an agent, however many), the groups by each of
        # their keys, and every lane registered.
        self._groups: dict[frozenset[uuid.UUID], _Group] = {}
        # A key named by one group holds it alone, not a set of one: most
        # keys (a person's own, a channel of two) are one stream's.
        self._index: dict[uuid.UUID, _Group | set[_Group]] = {}
        self._lanes: set[Reader] = set()
        # Told each time a waiting stream is woken.
        self.on_wake: Callable[[], None] | None = None
        self._recheck: asyncio.Task[None] | None = None
        # Lanes behind the window asking whether anything names them, and the
        # read asking for them.
        self._probes: collections.deque[
            tuple[int, frozenset[uuid.UUID], asyncio.Future[tuple[bool, int]]]
        ] = collections.deque()
        self._probing: asyncio.Task[None] | None = None
        # Who takes part where, for presence: the members of the channels
        # presence lanes hear (and of every channel changed meanwhile), each
        # account's channels, and the chains of agents whose presence moved.
        self._members: dict[uuid.UUID, frozenset[uuid.UUID]] = {}
        self._member_of: dict[uuid.UUID, tuple[uuid.UUID, ...]] = {}
        self._chains: dict[uuid.UUID, tuple[tuple[uuid.UUID, ...], uuid.UUID | None]] = {}
        # The keys beyond event_keys of the window's presence and inbox
        # events, as they were filed; each agent's latest presence change
        # in the window.
        self._extra: dict[int, tuple[uuid.UUID, ...]] = {}
        self._last_presence: dict[uuid.UUID, int] = {}

    @property
    def wanted(self) -> int:
        """The newest event id notified so far."""
        return self._wanted

    def poke(self, last_id: int) -> None:
        self._wanted = max(self._wanted, last_id)
        if self._wanted > self.head and (self._loading is None or self._loading.done()):
            self._loading = asyncio.get_running_loop().create_task(self._load())

    async def read(self, read: Callable[[Scope], Awaitable[T]]) -> T:
        """`read` as a subscriber whose token still signs in; Unauthenticated
        when none does."""
        while True:
            scope = self.scope
            try:
                # Read for every subscriber: no one token's share of the pool.
                with unshared():
                    return await read(scope)
            except Unauthenticated:
                self._stale.add(scope)
                live = self._latest_live()
                if live is None:
                    raise
                self.scope = live

    async def latest(self) -> None:
        """Catches up with whatever committed meanwhile."""
        with contextlib.suppress(Unauthenticated):
            self.poke(await self.read(self.store.last_event_id))

    async def _load(self) -> None:
        try:
            while self._wanted > self.head:
                batch = await self.read(
                    lambda scope: self.store.read_events(scope, self.head, BATCH, self.page_bytes)
                )
                if not batch:
                    break
                # Whether or not a presence lane waits now: one may resume
                # over these later, and files them as they are filed here.
                await self.learn_chains(batch)
                named = self._named
                for event in batch:
                    if event.channel is not None:
                        self._set_members(event.channel.channel_id, event.channel.member_ids)
                    extra = self._extra_keys(event)
                    if extra:
                        self._extra[event.event_id] = extra
                    if event.presence is not None:
                        self._last_presence[event.presence.account_id] = event.event_id
                    self.window.append(event)
                    self.window_bytes += event.size
                    for key in set(event_keys(event)).union(extra):
                        ids = named.get(key)
                        if ids is None:
                            ids = named[key] = _Ids()
                        ids.ids.append(event.event_id)
                while len(self.window) > WINDOW or (
                    self.window_bytes > self.max_window_bytes and len(self.window) > 1
                ):
                    gone = self.window.popleft()
                    self.window_bytes -= gone.size
                    extra = self._extra.pop(gone.event_id, ())
                    if gone.presence is not None:
                        agent = gone.presence.account_id
                        if self._last_presence.get(agent) == gone.event_id:
                            del self._last_presence[agent]
                    for key in set(event_keys(gone)).union(extra):
                        if named[key].drop_first():
                            del named[key]
                self.head = batch[-1].event_id
                self._wake()
                self._dispatch(batch)
        except Unauthenticated:
            pass  # no subscriber's token signs in: their streams are ending
        except Exception:
            log.exception("loading events of workspace %s", self.workspace_id)

    async def probe(self, after: int, keys: frozenset[uuid.UUID]) -> tuple[bool, int]:
        """Whether an event after `after` names one of `keys`, and the head
        the answer holds up to; asked in one read with every other lane
        asking meanwhile (a restart rebinds thousands at once)."""
        done: asyncio.Future[tuple[bool, int]] = asyncio.get_running_loop().create_future()
        self._probes.append((after, keys, done))
        if self._probing is None or self._probing.done():
            self._probing = asyncio.get_running_loop().create_task(self._run_probes())
        return await done

    async def _run_probes(self) -> None:
        while self._probes:
            # Lanes asking the same (sessions of one agent at one cursor) are
            # asked about once.
            asking: dict[tuple[int, frozenset[uuid.UUID]], list[asyncio.Future[tuple[bool, int]]]]
            asking = {}
            while self._probes and len(asking) < PROBE_BATCH:
                after, keys, done = self._probes.popleft()
                if not done.done():
                    asking.setdefault((after, keys), []).append(done)
            if not asking:
                continue
            asked = list(asking)
            try:
                hits, head = await self.read(
                    functools.partial(self.store.lanes_with_events, lanes=asked)
                )
            except asyncio.CancelledError:
                for waiting in asking.values():
                    for done in waiting:
                        done.cancel()
                raise
            except Exception as exc:
                for waiting in asking.values():
                    for done in waiting:
                        if not done.done():
                            done.set_exception(exc)
                continue
            for i, waiting in enumerate(asking.values()):
                for done in waiting:
                    if not done.done():
                        done.set_result((i in hits, head))

    # --- presence ---------------------------------------------------------

    def _set_members(self, channel_id: uuid.UUID, members: Iterable[uuid.UUID]) -> None:
        now = frozenset(members)
        before = self._members.get(channel_id, frozenset())
        # Tuples, not sets: most accounts are in a few channels, and
        # membership changes seldom.
        for account in before - now:
            left = tuple(c for c in self._member_of.get(account, ()) if c != channel_id)
            if left:
                self._member_of[account] = left
            else:
                self._member_of.pop(account, None)
        for account in now - before:
            self._member_of[account] = (*self._member_of.get(account, ()), channel_id)
        self._members[channel_id] = now

    async def know(self, channel_ids: Collection[uuid.UUID]) -> None:
        """Reads the members of the channels the feed doesn't know yet."""
        unknown = [c for c in channel_ids if c not in self._members]
        if not unknown:
            return
        found = await self.read(lambda scope: self.store.members_of(scope, unknown))
        for channel_id in unknown:
            if channel_id not in self._members:  # a change in the log may have told meanwhile
                self._set_members(channel_id, found.get(channel_id, ()))

    async def learn_chains(self, events: Iterable[Event]) -> None:
        """Reads the chains and owners of the agents whose presence moved in
        `events` that the feed doesn't know (again, after any agent moved)."""
        events = list(events)
        if any(e.moved is not None for e in events):
            self._chains.clear()
        unknown = {
            e.presence.account_id
            for e in events
            if e.presence is not None and e.presence.account_id not in self._chains
        }
        if unknown:
            found = await self.read(lambda scope: self.store.chains(scope, unknown))
            for agent in unknown:
                self._chains[agent] = found.get(agent, ((agent,), None))

    def _extra_keys(self, event: Event) -> tuple[uuid.UUID, ...]:
        """The keys an event is heard by besides event_keys: a presence
        change's, and an inbox change's audience (a person hears it by their
        own id). Who hears a presence change is also the query
        accounts.presence_heard (GetPresence heard): change both together."""
        if event.presence is not None:
            agent = event.presence.account_id
            chain, owner = self._chains.get(agent, ((agent,), None))
            keys = {presence_key(agent)}
            if owner is not None:
                # Its owner's streams hear it by the owner's own id: a person's
                # is no relay lane's key.
                keys.add(owner)
            for account in chain:
                for channel_id in self._member_of.get(account, ()):
                    keys.add(presence_key(channel_id))
            return tuple(keys)
        if event.inbox is not None:
            return event.inbox.audience
        return ()

    def keys_of(self, event: Event) -> set[uuid.UUID]:
        """Every key an event is heard by: as filed, while the window holds it."""
        extra = self._extra.get(event.event_id)
        if extra is None or self.event(event.event_id) is not event:
            extra = self._extra_keys(event)
        return set(event_keys(event)).union(extra)

    def superseded(self, event: Event, later: int = 0) -> bool:
        """A presence change the window (or `later`, a later change of the same
        agent the caller holds) already has a newer one of."""
        assert event.presence is not None
        newest = max(later, self._last_presence.get(event.presence.account_id, 0))
        return newest > event.event_id

    def _wake(self) -> None:
        self._changed.set()
        self._changed = asyncio.Event()

    def _dispatch(self, batch: list[Event]) -> None:
        """Wakes each waiting lane at the first event of the batch that names
        one of its keys and is past its cursor."""
        index = self._index
        if not index:
            return
        for event in batch:
            for key in self.keys_of(event):
                found = index.get(key)
                if found is None:
                    continue
                for group in (found,) if isinstance(found, _Group) else found:
                    for reader in group.readers:
                        if reader.parked and not reader.woken_at and event.event_id > reader.cursor:
                            reader.woken_at = event.event_id
                            if reader.waiter is not None and not reader.waiter.done():
                                reader.waiter.set_result(None)

    def register(self, reader: Reader) -> None:
        """Files the lane in the group of its interest's keys, again when
        they changed."""
        assert reader.lane is not None
        interest = reader.lane.interest
        version = interest.version
        if reader.group is not None and reader.version == version:
            return
        self.unregister(reader)
        keys = interest.keys()
        group = self._groups.get(keys)
        if group is None:
            group = self._groups[keys] = _Group(keys)
            for key in keys:
                found = self._index.get(key)
                if found is None:
                    self._index[key] = group
                elif isinstance(found, _Group):
                    self._index[key] = {found, group}
                else:
                    found.add(group)
        group.readers.add(reader)
        reader.group = group
        reader.version = version
        self._lanes.add(reader)

    def unregister(self, reader: Reader) -> None:
        group = reader.group
        if group is not None:
            group.readers.discard(reader)
            if not group.readers:
                del self._groups[group.keys]
                for key in group.keys:
                    found = self._index.get(key)
                    if found is group:
                        del self._index[key]
                    elif isinstance(found, set):
                        found.discard(group)
                        if len(found) == 1:
                            self._index[key] = found.pop()
        reader.group = None
        self._lanes.discard(reader)

    def start_rechecks(self) -> None:
        self._recheck = asyncio.get_running_loop().create_task(self._rechecks())

    def stop_rechecks(self) -> None:
        if self._recheck is not None:
            self._recheck.cancel()

    async def _rechecks(self) -> None:
        """Reads the log's head when nothing was heard for a while: a missed
        NOTIFY is caught up once for every stream of the feed."""
        while not self.closed:
            changed = self._changed
            try:
                async with asyncio.timeout(RECHECK_SECONDS):
                    await changed.wait()
            except TimeoutError:
                try:
                    await self.latest()
                except Exception as exc:
                    log.info("re-checking the events of workspace %s: %s", self.workspace_id, exc)

    def join(self, scope: Scope) -> None:
        # Latest last: a scope joined again moves to the end.
        self._scopes[scope] = self._scopes.pop(scope, 0) + 1
        self.scope = scope

    def leave(self, scope: Scope) -> None:
        left = self._scopes[scope] - 1
        if left:
            self._scopes[scope] = left
        else:
            del self._scopes[scope]
            self._stale.discard(scope)
        if self.scope == scope and not left:
            live = self._latest_live()
            if live is not None:
                self.scope = live

    def _latest_live(self) -> Scope | None:
        """The latest joined scope whose token has not stopped signing in."""
        for scope in reversed(self._scopes):
            if scope not in self._stale:
                return scope
        return None

    def close(self) -> None:
        self.closed = True
        self._wake()
        self.stop_rechecks()
        for reader in self._lanes:
            if reader.waiter is not None and not reader.waiter.done():
                reader.waiter.set_result(None)

    def next_naming(self, keys: Iterable[uuid.UUID], cursor: int) -> int | None:
        """For a cursor inside the window (`event(cursor + 1)` is there): the
        id of the first event after it naming one of `keys`, None when no
        event up to the head does."""
        first: int | None = None
        for key in keys:
            ids = self._named.get(key)
            if ids is not None:
                found = ids.after(cursor)
                if found is not None and (first is None or found < first):
                    first = found
        return first

    def event(self, event_id: int) -> Event | None:
        """The event with this id if the window holds it (ids have no gaps)."""
        window = self.window
        if window and window[0].event_id <= event_id <= window[-1].event_id:
            return window[event_id - window[0].event_id]
        return None

    async def wait_beyond(self, cursor: int) -> None:
        """Waits for any new event (a stream that looks at every event)."""
        while self.head <= cursor and not self.closed:
            await self._changed.wait()
            if self.on_wake is not None:
                self.on_wake()
        if self.closed:
            raise Closed

    async def wait_for_lane(self, reader: Reader, cursor: int) -> int:
        """Waits until an event past `cursor` names one of the lane's keys;
        returns the cursor to read on from: every event before that one was
        none of the lane's."""
        self.register(reader)
        reader.cursor = cursor
        reader.woken_at = 0
        reader.waiter = asyncio.get_running_loop().create_future()
        reader.parked = True
        try:
            await reader.waiter
        finally:
            if reader.lane is not None:
                reader.lane.went = max(reader.lane.went, reader.position())
            reader.parked = False
            reader.waiter = None
        if self.closed:
            raise Closed
        if self.on_wake is not None:
            self.on_wake()
        return max(cursor, reader.woken_at - 1)


class _Group:
    """Lanes filed under one set of keys."""

    __slots__ = ("keys", "readers")

    def __init__(self, keys: frozenset[uuid.UUID]) -> None:
        self.keys = keys
        self.readers: set[Reader] = set()


class Reader:
    """Where one stream is in its workspace's log, for the delivery lag; a
    lane's place in the feed's index while it waits."""

    __slots__ = ("cursor", "feed", "group", "lane", "parked", "version", "waiter", "woken_at")

    def __init__(self, feed: Feed, cursor: int, lane: Lane | None = None) -> None:
        self.feed = feed
        self.cursor = cursor
        self.lane = lane
        self.group: _Group | None = None
        self.version = 0
        self.parked = False
        self.woken_at = 0
        self.waiter: asyncio.Future[None] | None = None

    def position(self) -> int:
        """How far the stream has gone: a lane waiting has passed every event
        the feed holds up to the first that named it."""
        if self.parked:
            if self.woken_at:
                return self.woken_at - 1
            return max(self.cursor, self.feed.head)
        return self.cursor

    def behind(self) -> int:
        """Events committed (as notified) that this stream hasn't passed yet."""
        return max(0, max(self.feed.head, self.feed.wanted) - self.position())


class EventHub:
    def __init__(
        self,
        store: Store,
        database_url: str,
        *,
        window_bytes: int = WINDOW_BYTES,
        page_bytes: int = PAGE_BYTES,
        replay_bytes: int = REPLAY_BYTES,
        replay_bytes_per_token: int = REPLAY_BYTES_PER_TOKEN,
        replay_reads: int = REPLAY_READS,
    ) -> None:
        self.store = store
        self.url = database_url
        self.window_bytes = window_bytes
        self.page_bytes = page_bytes
        self.replay = Budget(replay_bytes, replay_bytes_per_token)
        self._reading = asyncio.Semaphore(replay_reads)
        self.feeds: dict[uuid.UUID, Feed] = {}
        self._task: asyncio.Task[None] | None = None
        self._listening = asyncio.Event()
        self._closed = False
        self._watchers: dict[str, list[Callable[[str | None], None]]] = {}
        # Told when the listener loses its connection: the database may have
        # restarted, and every pooled connection with it.
        self.on_lost: list[Callable[[], None]] = []
        self.readers: set[Reader] = set()
        # Told each time a waiting stream is woken to read new events.
        self.on_wake: Callable[[], None] | None = None
        # The channels each account's streams hear, held once per account.
        self.participations = Participations(store)

    def lag(self) -> int:
        """How far the most behind stream of this process is, in events."""
        return max((r.behind() for r in self.readers), default=0)

    def watch(self, channel: str, handler: Callable[[str | None], None]) -> None:
        """Also listens on `channel` (register before start; the events'
        own channel too): the handler gets each payload, and None after the
        listener reconnected, since what was sent meanwhile is lost."""
        self._watchers.setdefault(channel, []).append(handler)

    def _tell(self, channel: str, payload: str | None) -> None:
        for handler in self._watchers.get(channel, ()):
            try:
                handler(payload)
            except Exception:
                log.exception("handling a notification on %s", channel)

    async def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self._listen())
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(10):
                await self._listening.wait()

    async def close(self) -> None:
        self._closed = True
        for feed in self.feeds.values():
            feed.close()
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task

    async def _listen(self) -> None:
        backoff = 0.1
        listened = False
        while not self._closed:
            try:
                async with await psycopg.AsyncConnection.connect(self.url, autocommit=True) as conn:
                    await conn.execute(f"LISTEN {CHANNEL}")
                    for channel in self._watchers:
                        if channel != CHANNEL:
                            await conn.execute(f"LISTEN {channel}".encode())
                    self._listening.set()
                    backoff = 0.1
                    if listened:
                        for channel in self._watchers:
                            self._tell(channel, None)
                    listened = True
                    # Anything committed while we were not listening.
                    for feed in list(self.feeds.values()):
                        await feed.latest()
                    async for note in conn.notifies():
                        if note.channel == CHANNEL:
                            self._on_notify(note.payload)
                        self._tell(note.channel, note.payload)
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                log.warning("event listener lost its connection (%s); reconnecting", exc)
                for lost in self.on_lost:
                    lost()
                await asyncio.sleep(backoff)
                backoff = min(backoff * 2, 5.0)

    def _on_notify(self, payload: str) -> None:
        ws, _, last = payload.partition(":")
        try:
            feed = self.feeds.get(uuid.UUID(ws))
            if feed is not None:
                feed.poke(int(last))
        except ValueError:
            log.warning("ignoring a malformed notification %r", payload)

    async def _feed(self, scope: Scope) -> Feed:
        feed = self.feeds.get(scope.workspace_id)
        if feed is None:
            head = await self.store.last_event_id(scope)
            feed = self.feeds.get(scope.workspace_id)
            if feed is None:
                feed = self.feeds[scope.workspace_id] = Feed(
                    self.store, scope, head, self.window_bytes, self.page_bytes
                )
                feed.on_wake = self.on_wake
                feed.start_rechecks()
        feed.join(scope)
        feed.users += 1
        return feed

    def _release(self, feed: Feed, scope: Scope) -> None:
        feed.users -= 1
        feed.leave(scope)
        if feed.users == 0 and self.feeds.get(feed.workspace_id) is feed:
            del self.feeds[feed.workspace_id]
            feed.stop_rechecks()

    async def current(self, scope: Scope) -> int:
        return await self.store.last_event_id(scope)

    async def stream(
        self,
        scope: Scope,
        after: int,
        visible: Callable[[Event], bool],
        owner: uuid.UUID,
        room: Callable[[], int] | None = None,
        passed: Callable[[int], None] | None = None,
        lane: Lane | None = None,
    ) -> AsyncGenerator[Event]:
        """Every event of the scope's workspace after `after` that `visible`
        admits, in order, then live ones as they commit; ends with Closed when
        the hub shuts down. Pages of the log are paid from `owner`'s share of
        the replay budget (the account or runner the stream serves). `room`,
        when given, is how many events the caller can take before it has to
        wait: the log is read no further ahead than that. `passed`, when
        given, hears the id of each event `visible` left out: every event up
        to it was either left out or taken by the caller. `lane`, when given,
        says which events the stream may hear (`visible` still decides):
        waiting, it is woken only by those, and passes the rest unread."""
        if self._closed:
            raise Closed
        feed = await self._feed(scope)
        reader = Reader(feed, after, lane)
        presence = lane.presence if lane is not None else None
        if lane is not None:
            lane.reader = reader
        self.readers.add(reader)

        def heard(event: Event, later: int = 0) -> bool:
            # A presence lane hears a change by its keys, and only the latest.
            if event.presence is None or lane is None or presence is None:
                return True
            if feed.superseded(event, later):
                return False
            return not lane.interest.keys().isdisjoint(feed.keys_of(event))

        try:
            cursor = after
            probed = False
            keys: frozenset[uuid.UUID] = frozenset()
            keys_version = -1
            known = -1
            while True:
                if presence is not None and lane is not None and known != lane.interest.version:
                    known = lane.interest.version
                    await feed.know(presence())
                reader.cursor = cursor
                event = feed.event(cursor + 1)
                if event is not None and lane is not None and keys_version != lane.interest.version:
                    keys_version = lane.interest.version
                    keys = lane.interest.keys()
                if event is not None and lane is not None and len(keys) <= JUMP_KEYS:
                    # Inside the window a lane goes straight to the next event
                    # naming it; those in between are none of its.
                    named = feed.next_naming(keys, cursor)
                    skip_to = feed.head if named is None else named - 1
                    if skip_to > cursor:
                        cursor = reader.cursor = skip_to
                        if passed is not None:
                            passed(cursor)
                        event = None if named is None else feed.event(named)
                if event is not None:
                    cursor = event.event_id
                    if heard(event) and visible(event):
                        # Suspended, this generator keeps no reference to
                        # what it handed over: a caller that stops pulling
                        # holds that event alone.
                        box = [event]
                        del event
                        yield box.pop()
                    elif passed is not None:
                        passed(cursor)
                    continue
                if cursor >= feed.head:
                    if lane is None:
                        await feed.wait_beyond(cursor)
                        continue
                    skipped_to = await feed.wait_for_lane(reader, cursor)
                    probed = False
                    if skipped_to > cursor:
                        cursor = skipped_to
                        if passed is not None:
                            passed(cursor)
                    continue
                # Further behind than the window: a lane first asks (with the
                # others asking) whether anything there names it at all.
                if lane is not None and presence is None and not probed:
                    probed = True
                    version = lane.interest.version
                    found, head = await feed.probe(cursor, lane.interest.keys())
                    if not found and head > cursor and lane.interest.version == version:
                        cursor = reader.cursor = head
                        if passed is not None:
                            passed(cursor)
                    continue
                # A page of the log.
                limit = BATCH if room is None else max(1, min(BATCH, room()))
                held = self.page_bytes
                await self.replay.take(owner, held)
                try:
                    # A lane reads only what names its keys, and passes the rest.
                    version = lane.interest.version if lane is not None else 0
                    scanned = cursor
                    async with self._reading:
                        if lane is None or presence is not None:
                            events = await self.store.read_events(
                                scope, cursor, limit, self.page_bytes
                            )
                        else:
                            events, scanned = await self.store.read_lane_events(
                                scope, cursor, lane.interest.keys(), limit, self.page_bytes
                            )
                    # Each agent's latest presence change in the page.
                    later: dict[uuid.UUID, int] = {}
                    if presence is not None:
                        await feed.learn_chains(events)
                        later = {e.presence.account_id: e.event_id for e in events if e.presence}
                    page = collections.deque(events)
                    del events
                    weight = sum(e.size for e in page)
                    if weight > held:
                        self.replay.force(owner, weight - held)
                    else:
                        self.replay.give(owner, held - weight)
                    held = weight
                    while page:
                        event = page.popleft()
                        cursor = reader.cursor = event.event_id
                        # Handed over, it is the caller's: its bytes go back.
                        held -= event.size
                        self.replay.give(owner, event.size)
                        if event.presence is not None:
                            admitted = heard(event, later.get(event.presence.account_id, 0))
                        else:
                            admitted = True
                        if admitted and visible(event):
                            box = [event]
                            del event
                            yield box.pop()
                        elif passed is not None:
                            passed(cursor)
                        if (
                            lane is not None
                            and presence is None
                            and lane.interest.version != version
                        ):
                            # It hears more (or other) keys from here: read on with them.
                            break
                    else:
                        if scanned > cursor:
                            cursor = reader.cursor = scanned
                            if passed is not None:
                                passed(cursor)
                finally:
                    self.replay.give(owner, held)
        finally:
            self.readers.discard(reader)
            feed.unregister(reader)
            if lane is not None and lane.reader is reader:
                lane.reader = None
            self._release(feed, scope)
