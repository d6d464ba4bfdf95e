"""CommsService, once, for every transport: the relay calls these too."""

from __future__ import annotations

import collections
import contextlib
import sys
import uuid
from collections.abc import AsyncGenerator, AsyncIterator, Sequence

from compass.v1 import comms_pb2 as pb
from compass_server.api import mapping as wire
from compass_server.api import surface
from compass_server.api.errors import ApiError, Status
from compass_server.events.hub import EventHub, Lane
from compass_server.events.reach import Heard, Reach
from compass_server.receipts import Receipts
from compass_server.store import Store
from compass_server.store.cache import SizedCache
from compass_server.store.ids import parse_id
from compass_server.store.types import Actor, Event, EventKind, Message

# Every subscriber of a workspace sends the same wire event: it is built once
# and kept encoded while it is recent, within this many bytes (decoded, a
# protobuf message of many small fields weighs ~12× its encoding).
WIRE_CACHE_BYTES = 16 << 20
# Subscribe streams one account may hold open on one server process.
STREAMS_PER_ACCOUNT = 16
# Accounts a Subscribe stream may name in presence_of.
PRESENCE_OF = 256


class CommsApi:
    def __init__(
        self,
        store: Store,
        hub: EventHub,
        *,
        wire_cache_bytes: int = WIRE_CACHE_BYTES,
        streams_per_account: int = STREAMS_PER_ACCOUNT,
        receipts: Receipts | None = None,
    ) -> None:
        self.store = store
        self.hub = hub
        # Without keys every receipt is empty.
        self.receipts = receipts or Receipts(None, "")
        self._wire: SizedCache[tuple[uuid.UUID, int], bytes] = SizedCache(wire_cache_bytes)
        self.streams_per_account = streams_per_account
        self._streams: collections.Counter[uuid.UUID] = collections.Counter()

    def _message(self, actor: Actor, message: Message) -> pb.Message:
        """A message, each ended ask with its receipt."""
        return wire.message_to_wire(message, self.receipts.stamp(actor.workspace_id))

    def _wire_event(self, workspace_id: uuid.UUID, event: Event) -> pb.Event:
        key = (workspace_id, event.event_id)
        found = self._wire.get(key)
        if found is not None:
            return pb.Event.FromString(found)
        built = wire.event_to_wire(event, self.receipts.stamp(workspace_id))
        encoded = built.SerializeToString()
        self._wire.put(key, encoded, sys.getsizeof(encoded))
        return built

    async def create_channel(
        self, actor: Actor, req: pb.CreateChannelRequest
    ) -> pb.CreateChannelResponse:
        members = [parse_id(m, "member_account_ids") for m in req.member_account_ids]
        channel = await self.store.create_channel(actor, req.name, req.topic, members)
        return pb.CreateChannelResponse(channel=wire.channel_to_wire(channel))

    async def list_channels(
        self, actor: Actor, req: pb.ListChannelsRequest
    ) -> pb.ListChannelsResponse:
        page = await self.store.list_channels(actor, req.page_size, req.page_token)
        return pb.ListChannelsResponse(
            channels=[wire.channel_to_wire(c) for c in page.items],
            next_page_token=page.next_page_token,
        )

    async def open_dm(self, actor: Actor, req: pb.OpenDMRequest) -> pb.OpenDMResponse:
        channel = await self.store.open_dm(actor, parse_id(req.account_id, "account_id"))
        return pb.OpenDMResponse(channel=wire.channel_to_wire(channel))

    async def add_channel_member(
        self, actor: Actor, req: pb.AddChannelMemberRequest
    ) -> pb.AddChannelMemberResponse:
        channel = await self.store.add_channel_member(
            actor, parse_id(req.channel_id, "channel_id"), parse_id(req.account_id, "account_id")
        )
        return pb.AddChannelMemberResponse(channel=wire.channel_to_wire(channel))

    async def update_topic(
        self, actor: Actor, req: pb.UpdateTopicRequest
    ) -> pb.UpdateTopicResponse:
        channel = await self.store.update_topic(
            actor, parse_id(req.channel_id, "channel_id"), req.topic
        )
        return pb.UpdateTopicResponse(channel=wire.channel_to_wire(channel))

    async def set_channel_follow_up_default(
        self, actor: Actor, req: pb.SetChannelFollowUpDefaultRequest
    ) -> pb.SetChannelFollowUpDefaultResponse:
        stored = await self.store.set_channel_follow_up_default(
            actor,
            parse_id(req.channel_id, "channel_id"),
            wire.follow_up_from_wire(req.follow_up) if req.HasField("follow_up") else None,
        )
        out = pb.SetChannelFollowUpDefaultResponse()
        if stored is not None:
            # Present even when empty: "no follow-ups" differs from unset.
            out.follow_up.SetInParent()
            out.follow_up.CopyFrom(wire.follow_up_to_wire(stored))
        return out

    async def get_channel_follow_up_default(
        self, actor: Actor, req: pb.GetChannelFollowUpDefaultRequest
    ) -> pb.GetChannelFollowUpDefaultResponse:
        stored = await self.store.channel_follow_up_default(
            actor, parse_id(req.channel_id, "channel_id")
        )
        out = pb.GetChannelFollowUpDefaultResponse()
        if stored is not None:
            # Present even when empty: "no follow-ups" differs from unset.
            out.follow_up.SetInParent()
            out.follow_up.CopyFrom(wire.follow_up_to_wire(stored))
        return out

    async def post_message(
        self, actor: Actor, req: pb.PostMessageRequest
    ) -> pb.PostMessageResponse:
        posted = await self.store.post(
            actor,
            parse_id(req.channel_id, "channel_id"),
            wire.blocks_from_wire(req.blocks),
            surface=surface.current(),
            client_key=req.client_key,
            allow_identical=req.allow_identical,
        )
        return pb.PostMessageResponse(
            message=self._message(actor, posted.message),
            outcome=wire.POST_OUTCOME_TO_WIRE[posted.outcome],
        )

    async def list_messages(
        self, actor: Actor, req: pb.ListMessagesRequest
    ) -> pb.ListMessagesResponse:
        page = await self.store.list_messages(
            actor, parse_id(req.channel_id, "channel_id"), req.page_size, req.page_token
        )
        return pb.ListMessagesResponse(
            messages=[self._message(actor, m) for m in page.items],
            next_page_token=page.next_page_token,
        )

    async def get_message(self, actor: Actor, req: pb.GetMessageRequest) -> pb.GetMessageResponse:
        message = await self.store.get_message(actor, parse_id(req.message_id, "message_id"))
        return pb.GetMessageResponse(message=self._message(actor, message))

    async def search_messages(
        self, actor: Actor, req: pb.SearchMessagesRequest
    ) -> pb.SearchMessagesResponse:
        page = await self.store.search_messages(
            actor,
            req.query,
            wire.optional_id(req.channel_id, "channel_id"),
            req.page_size,
            req.page_token,
        )
        return pb.SearchMessagesResponse(
            messages=[self._message(actor, m) for m in page.items],
            next_page_token=page.next_page_token,
        )

    async def respond_to_ask(
        self, actor: Actor, req: pb.RespondToAskRequest
    ) -> pb.RespondToAskResponse:
        done = await self.store.answer(
            actor,
            req.ask_id,
            wire.answers_from_wire(req.answers),
            surface=surface.current(),
            standing=wire.standing_terms_from_wire(req),
        )
        out = pb.RespondToAskResponse(ask_message=self._message(actor, done.ask_message))
        if done.answer_message is not None:
            out.answer_message.CopyFrom(wire.message_to_wire(done.answer_message))
        if done.standing_answer is not None:
            out.standing_answer.CopyFrom(wire.standing_to_wire(done.standing_answer))
        return out

    async def decline_ask(self, actor: Actor, req: pb.DeclineAskRequest) -> pb.DeclineAskResponse:
        ask_message = await self.store.decline_ask(
            actor, req.ask_id, req.reason, surface=surface.current()
        )
        return pb.DeclineAskResponse(ask_message=self._message(actor, ask_message))

    async def withdraw_ask(
        self, actor: Actor, req: pb.WithdrawAskRequest
    ) -> pb.WithdrawAskResponse:
        ask_message, _ = await self.store.withdraw_ask(actor, req.ask_id, surface=surface.current())
        return pb.WithdrawAskResponse(ask_message=self._message(actor, ask_message))

    async def get_ask_history(
        self, actor: Actor, req: pb.GetAskHistoryRequest
    ) -> pb.GetAskHistoryResponse:
        history = await self.store.ask_history(actor, req.ask_id)
        receipt = ""
        if self.receipts.on and any(e.change.ends for e in history.entries):
            message, ask = await self.store.get_ask(actor, req.ask_id)
            receipt = self.receipts.sign(actor.workspace_id, message.author_id, ask)
        return wire.history_to_wire(history, receipt)

    async def get_ask_message(
        self, actor: Actor, req: pb.GetAskMessageRequest
    ) -> pb.GetAskMessageResponse:
        message, _ = await self.store.get_ask(actor, req.ask_id)
        return pb.GetAskMessageResponse(message=self._message(actor, message))

    async def list_standing_answers(
        self, actor: Actor, req: pb.ListStandingAnswersRequest
    ) -> pb.ListStandingAnswersResponse:
        found = await self.store.list_standing_answers(actor, req.include_ended)
        return pb.ListStandingAnswersResponse(
            standing_answers=[wire.standing_to_wire(s) for s in found]
        )

    async def revoke_standing_answer(
        self, actor: Actor, req: pb.RevokeStandingAnswerRequest
    ) -> pb.RevokeStandingAnswerResponse:
        revoked = await self.store.revoke_standing_answer(
            actor, parse_id(req.standing_answer_id, "standing_answer_id")
        )
        return pb.RevokeStandingAnswerResponse(standing_answer=wire.standing_to_wire(revoked))

    async def get_presence(
        self, actor: Actor, req: pb.GetPresenceRequest
    ) -> pb.GetPresenceResponse:
        ids = [parse_id(a, "account_ids") for a in req.account_ids]
        presences = await self.store.get_presence(actor, ids, heard=req.heard)
        return pb.GetPresenceResponse(presences=[wire.presence_to_wire(p) for p in presences])

    async def get_accounts(
        self, actor: Actor, req: pb.GetAccountsRequest
    ) -> pb.GetAccountsResponse:
        ids = [parse_id(a, "account_ids") for a in req.account_ids]
        accounts = await self.store.get_accounts(actor, ids)
        return pb.GetAccountsResponse(accounts=[wire.account_to_wire(a) for a in accounts])

    @property
    def open_streams(self) -> int:
        """Subscribe streams open on this process."""
        return sum(self._streams.values())

    async def subscribe(self, actor: Actor, req: pb.SubscribeRequest) -> AsyncIterator[pb.Event]:
        """First a ready frame with the cursor, then the caller's events in order."""
        # The cap first, and the place taken before any read: streams being
        # set up count too.
        if self._streams[actor.account_id] >= self.streams_per_account:
            raise ApiError(
                Status.RESOURCE_EXHAUSTED,
                f"this account has {self.streams_per_account} Subscribe streams open on this "
                "server, the most it may; close one first",
            )
        self._streams[actor.account_id] += 1
        try:
            async with contextlib.aclosing(self._subscribe(actor, req)) as events:
                async for wired in events:
                    yield wired
        finally:
            self._streams[actor.account_id] -= 1
            if not self._streams[actor.account_id]:
                del self._streams[actor.account_id]

    async def _subscribe(self, actor: Actor, req: pb.SubscribeRequest) -> AsyncGenerator[pb.Event]:
        current = await self.hub.current(actor)
        if req.after_event_id < 0:
            raise ApiError(Status.INVALID_ARGUMENT, "after_event_id can't be negative")
        if req.after_event_id > current:
            raise ApiError(
                Status.INVALID_ARGUMENT,
                f"after_event_id {req.after_event_id} is ahead of this workspace's log ({current})",
            )
        asked = _presence_of(req.presence_of)
        cursor = req.after_event_id or current
        reach = await Reach.of(self.hub.participations, actor)
        # Its own account's key brings the agents it owns, as they come.
        heard = Heard(reach, asked | await self.store.granted_agents(actor))
        del asked  # the stream holds what Heard keeps, not its inputs

        def visible(event: Event) -> bool:
            if event.inbox is not None:
                if actor.account_id not in event.inbox.audience:
                    return False
                # Its inbox reaches this stream: so does its presence.
                heard.add(event.inbox.agent_id)
                return True
            if event.kind is EventKind.AGENT_MOVED:
                # Taken below, never sent: what the stream reaches changes.
                return reach.moved(event)
            if event.channel_id is None:
                return True
            return reach.hears(event)

        yield pb.Event(event_id=cursor, ready=pb.Ready())
        lane = Lane(heard, presence=heard.channels)
        events = self.hub.stream(actor, cursor, visible, actor.account_id, lane=lane)
        async with contextlib.aclosing(events):
            async for event in events:
                if event.moved is not None:
                    await reach.reload()
                    continue
                wired = self._wire_event(actor.workspace_id, event)
                del event  # a client that stops reading holds the wire event alone
                yield wired


def _presence_of(ids: Sequence[str]) -> frozenset[uuid.UUID]:
    if len(ids) > PRESENCE_OF:
        raise ApiError(Status.INVALID_ARGUMENT, f"presence_of names at most {PRESENCE_OF} accounts")
    out = set()
    for value in ids:
        try:
            out.add(uuid.UUID(value))
        except ValueError:
            raise ApiError(
                Status.INVALID_ARGUMENT, f"presence_of holds account ids; {value!r} is not one"
            ) from None
    return frozenset(out)
