"""Store structs: what the store takes and returns, separate from wire messages."""

from __future__ import annotations

import dataclasses
import datetime
import enum
import uuid
from dataclasses import dataclass, field
from typing import Generic, Protocol, TypeVar


class AccountKind(enum.StrEnum):
    HUMAN = "human"
    AGENT = "agent"


class Role(enum.StrEnum):
    """A person's standing in their workspace; agents are always members."""

    MEMBER = "member"
    ADMIN = "admin"


class PresenceState(enum.StrEnum):
    OFFLINE = "offline"
    IDLE = "idle"
    WORKING = "working"
    WAITING = "waiting"


class ChannelKind(enum.StrEnum):
    CHANNEL = "channel"
    DM = "dm"


class EventKind(enum.StrEnum):
    MESSAGE_POSTED = "message_posted"
    MESSAGE_UPDATED = "message_updated"
    PRESENCE_CHANGED = "presence_changed"
    CHANNEL_CHANGED = "channel_changed"
    INBOX_ITEM_CHANGED = "inbox_item_changed"
    # An agent was put under another parent (or made a root): what it and
    # the agents below it take part in changed. Streams read it; no client does.
    AGENT_MOVED = "agent_moved"


class Scope(Protocol):
    """What a workspace transaction runs as: the caller's workspace, and the
    digest of the credential it signed in with, which is how the database
    knows that workspace (a claim of the workspace alone proves nothing)."""

    @property
    def workspace_id(self) -> uuid.UUID: ...

    @property
    def credential(self) -> bytes: ...


@dataclass(frozen=True, slots=True)
class Actor:
    """Who a call runs as: an account of one workspace, through a credential
    (its own token's, or its runner's on the relay)."""

    workspace_id: uuid.UUID
    account_id: uuid.UUID
    kind: AccountKind
    credential: bytes = dataclasses.field(repr=False)
    # The runner whose session this agent is, on the relay.
    runner_id: uuid.UUID | None = None


@dataclass(frozen=True, slots=True)
class RunnerPrincipal:
    workspace_id: uuid.UUID
    runner_id: uuid.UUID
    credential: bytes = dataclasses.field(repr=False)


@dataclass(frozen=True, slots=True)
class Operator:
    """The operator at the command line, working on one workspace: may do
    every admin operation there without an account or a credential (its
    transactions run as compass_maintenance, which may name a workspace)."""

    workspace_id: uuid.UUID


@dataclass(frozen=True, slots=True)
class Workspace:
    workspace_id: uuid.UUID
    name: str


@dataclass(frozen=True, slots=True)
class Account:
    account_id: uuid.UUID
    workspace_id: uuid.UUID
    handle: str
    kind: AccountKind
    owner_id: uuid.UUID | None
    role: Role = Role.MEMBER
    created_at: datetime.datetime | None = None
    # The agent above this one in its tree; None for a root and for people.
    parent_id: uuid.UUID | None = None


@dataclass(frozen=True, slots=True)
class Runner:
    runner_id: uuid.UUID
    workspace_id: uuid.UUID
    name: str
    # The agents it may bind sessions for.
    agent_ids: tuple[uuid.UUID, ...] = ()
    created_at: datetime.datetime | None = None


@dataclass(frozen=True, slots=True)
class Token:
    """A token as listed: never its secret."""

    token_id: uuid.UUID
    workspace_id: uuid.UUID
    # Exactly one of account_id and runner_id; account_kind goes with account_id.
    account_id: uuid.UUID | None
    account_kind: AccountKind | None
    runner_id: uuid.UUID | None
    label: str
    created_at: datetime.datetime
    expires_at: datetime.datetime | None
    last_used_at: datetime.datetime | None
    revoked_at: datetime.datetime | None
    replaced_by: uuid.UUID | None
    # Neither revoked nor expired when it was read.
    active: bool


@dataclass(frozen=True, slots=True)
class IssuedToken:
    """A new token: its secret, shown this once, and its record."""

    secret: str
    token: Token


@dataclass(frozen=True, slots=True)
class SignIn:
    """Who a token signed in as, and for how long it may still sign in."""

    principal: Actor | RunnerPrincipal
    token_id: uuid.UUID
    # Seconds until it expires, as the database counted at sign-in; None: never.
    expires_in: float | None
    # The credential's kind: "token", or "session" (a browser's cookie).
    via: str = "token"


@dataclass(frozen=True, slots=True)
class Identity:
    """What WhoAmI tells a token: its workspace, its account or runner, itself."""

    workspace: Workspace
    principal: Account | Runner
    token: Token


@dataclass(frozen=True, slots=True)
class Channel:
    channel_id: uuid.UUID
    name: str
    topic: str
    kind: ChannelKind
    member_ids: tuple[uuid.UUID, ...]
    created_at: datetime.datetime


@dataclass(frozen=True, slots=True)
class TextBlock:
    text: str


@dataclass(frozen=True, slots=True)
class AskOption:
    id: str
    label: str
    description: str = ""
    preview: str = ""


@dataclass(frozen=True, slots=True)
class AskQuestion:
    question_id: str
    question: str
    header: str = ""
    options: tuple[AskOption, ...] = ()
    allow_multiple: bool = False
    recommended: int | None = None
    # Server-owned answer state, empty while pending.
    chosen_option_ids: tuple[str, ...] = ()
    custom_text: str = ""
    timed_out: bool = False


class EndingKind(enum.StrEnum):
    """How an ask ended; it ends exactly once."""

    ANSWERED = "answered"
    WITHDRAWN_BY_AGENT = "withdrawn_by_agent"
    WITHDRAWN_BY_OWNER = "withdrawn_by_owner"
    DECLINED = "declined"
    EXPIRED = "expired"
    # Inbox asks only: the agent's newer ask in the same item took its place.
    REPLACED = "replaced"
    # Inbox asks only: a person who reads the agent's inbox closed the item.
    WITHDRAWN_BY_PERSON = "withdrawn_by_person"


class AskChange(enum.StrEnum):
    """An entry of an ask's history: its post, a quorum ask's votes, then its
    ending."""

    POSTED = "posted"
    ANSWERED = "answered"
    WITHDRAWN_BY_AGENT = "withdrawn_by_agent"
    WITHDRAWN_BY_OWNER = "withdrawn_by_owner"
    DECLINED = "declined"
    EXPIRED = "expired"
    # A named person's vote in a quorum ask that did not end it.
    QUORUM_ANSWER = "quorum_answer"
    QUORUM_DECLINE = "quorum_decline"

    @property
    def ends(self) -> bool:
        """Whether the entry is the ask's ending (its post and votes are not)."""
        return self not in (AskChange.POSTED, AskChange.QUORUM_ANSWER, AskChange.QUORUM_DECLINE)


class Surface(enum.StrEnum):
    """Where a change to an ask came from."""

    GRPC = "grpc"
    CONNECT = "connect"
    RELAY = "relay"
    # The web page: Connect calls that name it in a header.
    WEB = "web"
    INBOX = "inbox"
    # The server itself: an expiry.
    SERVER = "server"
    # A person's standing answer, at the ask's post.
    STANDING_ANSWER = "standing_answer"
    SLACK = "slack"
    # A reply to the mail about the ask.
    EMAIL = "email"
    # A tap on a choice of the ask's push notification.
    PUSH = "push"


@dataclass(frozen=True, slots=True)
class Answer:
    """One question's answer as RespondToAsk carries it."""

    question_id: str
    chosen_option_ids: tuple[str, ...] = ()
    custom_text: str = ""


@dataclass(frozen=True, slots=True)
class AskEnding:
    kind: EndingKind
    # None only for asks that ended before endings were recorded.
    at: datetime.datetime | None = None
    # None for an expiry (and for asks that ended before endings were recorded).
    actor_id: uuid.UUID | None = None
    actor_handle: str = ""
    surface: Surface | None = None
    reason: str = ""
    # The standing answer that answered the ask for its person (actor_id).
    standing_answer_id: uuid.UUID | None = None


class VoteKind(enum.StrEnum):
    ANSWER = "answer"
    DECLINE = "decline"


@dataclass(frozen=True, slots=True)
class QuorumVote:
    """One named person's part in a quorum ask: their answer or decline,
    final for them."""

    account_id: uuid.UUID
    handle: str
    kind: VoteKind
    # An answer's answers, one per question.
    answers: tuple[Answer, ...] = ()
    reason: str = ""
    at: datetime.datetime | None = None
    surface: Surface | None = None
    # The standing answer that voted for the person.
    standing_answer_id: uuid.UUID | None = None


@dataclass(frozen=True, slots=True)
class FollowUp:
    """Reminders after `remind_after` (up to `remind_times`), an escalation
    after `escalate_after`; both timed from the post."""

    remind_after: datetime.timedelta | None = None
    remind_times: int = 0
    escalate_after: datetime.timedelta | None = None
    escalate_to: tuple[uuid.UUID, ...] = ()
    escalate_to_owner: bool = False
    # A channel the asker posts a note of the ask in at the escalation.
    escalate_to_channel: uuid.UUID | None = None


@dataclass(frozen=True, slots=True)
class FollowUpStep:
    kind: str  # "reminded" or "escalated"
    at: datetime.datetime
    account_ids: tuple[uuid.UUID, ...] = ()
    urgent: bool = False
    reposted_channel: uuid.UUID | None = None
    repost_message: uuid.UUID | None = None


@dataclass(frozen=True, slots=True)
class AlwaysOption:
    """An option whose choice is also a standing answer for `seconds`."""

    question_id: str
    option_id: str
    seconds: float


@dataclass(frozen=True, slots=True)
class Ask:
    questions: tuple[AskQuestion, ...]
    # Server-owned: minted at append; answered/cancelled never both true.
    ask_id: str = ""
    answered: bool = False
    cancelled: bool = False
    # When it expires if still open; set at post, from `timeout` if given.
    deadline: datetime.datetime | None = None
    # Inbound only: the deadline as a time from the post.
    timeout: datetime.timedelta | None = None
    # Who may answer or decline; empty means any person in the channel.
    answerer_ids: tuple[uuid.UUID, ...] = ()
    # Server-owned: their handles, filled at post.
    answerer_handles: tuple[str, ...] = ()
    # Server-owned: None while open.
    ending: AskEnding | None = None
    # Server-owned, never on the wire: the W3C traceparent of the traced call
    # that posted it, so its ending and delivery join the asker's trace.
    trace: str = ""
    # How many of answerer_ids must answer; 0: the first answer ends it.
    quorum: int = 0
    # With a quorum: a decline counts against it instead of ending the ask.
    declines_count_against_quorum: bool = False
    # Server-owned: the named people's votes, in the order recorded.
    quorum_votes: tuple[QuorumVote, ...] = ()
    follow_up: FollowUp | None = None
    # Server-owned: the follow-up steps taken, in order.
    follow_up_steps: tuple[FollowUpStep, ...] = ()
    # Server-owned, never on the wire: an option that, chosen, makes the
    # answer standing (a hook's "Always allow this rule"); only the server's
    # own posts set it.
    always: AlwaysOption | None = None

    @property
    def is_open(self) -> bool:
        return self.ending is None and not self.answered and not self.cancelled

    def vote_of(self, account_id: uuid.UUID) -> QuorumVote | None:
        return next((v for v in self.quorum_votes if v.account_id == account_id), None)

    @property
    def quorum_answers(self) -> int:
        """Answers a quorum ask has so far."""
        return sum(1 for v in self.quorum_votes if v.kind is VoteKind.ANSWER)

    @property
    def one_tap(self) -> bool:
        """Answered by one tap on a notification's action: see `takes_one_tap`."""
        q = self.questions
        return takes_one_tap(
            len(q), bool(q and q[0].allow_multiple), len(q[0].options) if q else 0, self.quorum
        )


# The most choices a notification carries as its actions: two is what every
# platform that shows Web Push actions shows.
TAP_CHOICES = 2


def takes_one_tap(questions: int, allow_multiple: bool, options: int, quorum: int) -> bool:
    """An ask one tap answers: a single question of one choice among at most
    TAP_CHOICES, and no quorum (a vote there is final for its person, so it is
    made on the page where the other votes are seen)."""
    return questions == 1 and not allow_multiple and 0 < options <= TAP_CHOICES and not quorum


@dataclass(frozen=True, slots=True)
class AskAnswerBlock:
    """The answered snapshot posted by the answerer; server-written only."""

    ask_id: str
    ask_message_id: uuid.UUID
    questions: tuple[AskQuestion, ...]
    # A quorum ask's answers, every one of them.
    quorum_votes: tuple[QuorumVote, ...] = ()


Block = TextBlock | Ask | AskAnswerBlock


@dataclass(frozen=True, slots=True)
class Message:
    message_id: uuid.UUID
    channel_id: uuid.UUID
    author_id: uuid.UUID
    author_handle: str
    blocks: tuple[Block, ...]
    created_at: datetime.datetime
    position: int = 0

    def ask(self, ask_id: str) -> Ask | None:
        for block in self.blocks:
            if isinstance(block, Ask) and block.ask_id == ask_id:
                return block
        return None


@dataclass(frozen=True, slots=True)
class AskHistoryEntry:
    change: AskChange
    at: datetime.datetime
    # None for an expiry.
    actor_id: uuid.UUID | None = None
    actor_handle: str = ""
    # None for changes made before surfaces were recorded.
    surface: Surface | None = None
    reason: str = ""
    # The standing answer that made the change for its person.
    standing_answer_id: uuid.UUID | None = None


@dataclass(frozen=True, slots=True)
class AskHistory:
    """An ask's record as a reader sees it, and what the reader may do now."""

    ask_id: str
    entries: tuple[AskHistoryEntry, ...]
    may_answer: bool
    may_withdraw: bool


@dataclass(frozen=True, slots=True)
class StandingTerms:
    """What an answer asks for to stand: for how long, and whether the
    agents below the asking agent are included."""

    duration: datetime.timedelta
    include_subagents: bool = False


@dataclass(frozen=True, slots=True)
class StandingAnswer:
    """A person's rule: later asks of the agent (and with include_subagents
    the agents below it) whose every question is one of `questions` are
    answered at their post, this way, for the person."""

    standing_answer_id: uuid.UUID
    account_id: uuid.UUID
    handle: str
    agent_id: uuid.UUID
    agent_handle: str
    include_subagents: bool
    # The questions it answers, each with its answer state.
    questions: tuple[AskQuestion, ...]
    made_from_ask_id: str
    created_at: datetime.datetime
    expires_at: datetime.datetime
    revoked_at: datetime.datetime | None = None
    asks_answered: int = 0


@dataclass(frozen=True, slots=True)
class Presence:
    account_id: uuid.UUID
    state: PresenceState
    status_text: str = ""


@dataclass(frozen=True, slots=True)
class Event:
    """One entry of a workspace's event log."""

    event_id: int
    kind: EventKind
    # Members of this channel see the event; None means the whole workspace.
    channel_id: uuid.UUID | None
    message: Message | None = None
    presence: Presence | None = None
    channel: Channel | None = None
    created_at: datetime.datetime | None = None
    inbox: InboxChange | None = None
    # What the event weighs in memory, decoded (`weight.weigh`), for memory
    # bounds: at least its stored payload's bytes.
    size: int = 0
    moved: AgentMove | None = None


@dataclass(frozen=True, slots=True)
class AgentMove:
    """An agent put under a new parent (None: made a root)."""

    account_id: uuid.UUID
    parent_id: uuid.UUID | None


@dataclass(frozen=True, slots=True)
class Participation:
    """What an account takes part in: its chain (itself, then each agent
    above it) and every channel that it or one of those is a member of, with
    since when (the member joined and every link below it was made)."""

    account_id: uuid.UUID
    chain: tuple[uuid.UUID, ...]
    channels: dict[uuid.UUID, datetime.datetime]


class InboxStatus(enum.StrEnum):
    """Where an inbox item stands, from its newest ask."""

    OPEN = "open"
    ANSWERED = "answered"
    CLOSED = "closed"
    # Posted without an ask under a new key: waits on nobody.
    NOTE = "note"


class AskStatus(enum.StrEnum):
    """The standing of an ask in an inbox thread."""

    OPEN = "open"
    # A later post with an ask took its place.
    REPLACED = "replaced"
    ANSWERED = "answered"
    WITHDRAWN = "withdrawn"
    # A person declined it; the ask's ending says who and why.
    DECLINED = "declined"


@dataclass(frozen=True, slots=True)
class Attachment:
    """A picture's metadata; its bytes are fetched by (item, attachment id)."""

    attachment_id: uuid.UUID
    name: str
    content_type: str
    size_bytes: int


@dataclass(frozen=True, slots=True)
class InboxMessage:
    """One message of an inbox thread: text, then an ask or an answered snapshot."""

    message_id: uuid.UUID
    item_id: uuid.UUID
    author_id: uuid.UUID
    author_handle: str
    # The ask block's answered/cancelled follow ask_status.
    blocks: tuple[Block, ...]
    created_at: datetime.datetime
    position: int = 0
    ask_status: AskStatus | None = None
    withdrawn_reason: str = ""
    attachments: tuple[Attachment, ...] = ()

    @property
    def ask(self) -> Ask | None:
        return next((b for b in self.blocks if isinstance(b, Ask)), None)

    @property
    def answer(self) -> AskAnswerBlock | None:
        return next((b for b in self.blocks if isinstance(b, AskAnswerBlock)), None)


@dataclass(frozen=True, slots=True)
class InboxChange:
    """An inbox item changed; heard by `audience` (the agent, its owner, grantees)."""

    item_id: uuid.UUID
    agent_id: uuid.UUID
    key: str
    revision: int
    status: InboxStatus
    actor_id: uuid.UUID
    audience: tuple[uuid.UUID, ...]
    # The message the change wrote; None for a close or a take-back.
    message: InboxMessage | None = None


T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class Page(Generic[T]):
    items: list[T]
    next_page_token: str = ""


@dataclass(frozen=True, slots=True)
class SessionBinding:
    session_id: uuid.UUID
    agent_id: uuid.UUID
    acked_event_id: int
    # What the agent takes part in as it was bound, read in the same
    # transaction (its lane starts from it).
    participation: Participation | None = None


# --- webhooks ---------------------------------------------------------------------


class WebhookKind(enum.StrEnum):
    """What an endpoint receives: Standard Webhooks JSON, or Slack messages
    (an incoming webhook's Block Kit cards)."""

    STANDARD = "standard"
    SLACK = "slack"
    # Mail to the people an ask is for; its URL is the sender, a mailto: address.
    EMAIL = "email"
    # A connected Slack app: its deliveries are Web API calls (compass_server/slack).
    SLACK_APP = "slack_app"
    # Web Push to the people's browsers; its URL is the VAPID subject (mailto:).
    PUSH = "push"


class WebhookEventType(enum.StrEnum):
    ASK_POSTED = "ask.posted"
    ASK_ANSWERED = "ask.answered"
    ASK_DECLINED = "ask.declined"
    # By its agent or by the agent's owner; the payload's ending says which.
    ASK_WITHDRAWN = "ask.withdrawn"
    ASK_EXPIRED = "ask.expired"
    # A named person's answer or decline in a quorum ask that did not end it.
    ASK_VOTED = "ask.voted"
    # A follow-up step of an open ask: its answerers reminded, or people added.
    ASK_REMINDED = "ask.reminded"
    ASK_ESCALATED = "ask.escalated"
    INBOX_ITEM_OPENED = "inbox.item.opened"
    INBOX_ITEM_ANSWERED = "inbox.item.answered"
    INBOX_ITEM_CLOSED = "inbox.item.closed"


class DeliveryState(enum.StrEnum):
    PENDING = "pending"
    DELIVERED = "delivered"
    # Every retry of its schedule failed, or its endpoint said 410 Gone.
    FAILED = "failed"


@dataclass(frozen=True, slots=True)
class Webhook:
    """An endpoint as listed: never its secret, and its URL only as shown."""

    webhook_id: uuid.UUID
    workspace_id: uuid.UUID
    kind: WebhookKind
    url_shown: str
    # Empty: every type.
    event_types: tuple[WebhookEventType, ...]
    enabled: bool
    disabled_reason: str
    disabled_at: datetime.datetime | None
    created_at: datetime.datetime
    # Until when the secret before the last rotation still signs.
    previous_secret_until: datetime.datetime | None
    pending: int = 0
    failed: int = 0


@dataclass(frozen=True, slots=True)
class NewWebhook:
    """An endpoint just made, or its secret just rotated: the secret is shown
    this once."""

    webhook: Webhook
    secret: str


@dataclass(frozen=True, slots=True)
class WebhookDelivery:
    delivery_id: uuid.UUID
    webhook_id: uuid.UUID
    # The event's sequence number in its workspace.
    event_id: int
    event_type: WebhookEventType
    # The ask or inbox item it is about.
    subject: str
    state: DeliveryState
    attempts: int
    # When the next attempt is due (pending only).
    next_attempt_at: datetime.datetime | None
    created_at: datetime.datetime
    finished_at: datetime.datetime | None
    last_status_code: int | None = None
    last_error: str = ""


@dataclass(frozen=True, slots=True)
class WebhookAttempt:
    n: int
    server_id: uuid.UUID
    started_at: datetime.datetime
    # None while under way.
    finished_at: datetime.datetime | None
    status_code: int | None
    latency_ms: float | None
    error: str
    response: str


@dataclass(frozen=True, slots=True)
class DeliveryDraft:
    """A delivery to make from one event of the log."""

    event_id: int
    event_type: WebhookEventType
    subject: str
    dedupe_key: str
    body: str


@dataclass(frozen=True, slots=True)
class ClaimedDelivery:
    """A delivery claimed for one attempt, with what sending it takes."""

    delivery_id: uuid.UUID
    workspace_id: uuid.UUID
    webhook_id: uuid.UUID
    attempt: int
    # Failures so far: the place in the retry schedule.
    failures: int
    event_type: WebhookEventType
    body: str
    kind: WebhookKind
    url: str
    # The current secret first, then the one before a rotation during its grace.
    secrets: tuple[str, ...]
    # Why its URL or secrets can't be read here (another key); empty when they can.
    problem: str = ""


@dataclass(frozen=True, slots=True)
class AttemptResult:
    """How one attempt went, to record."""

    delivery_id: uuid.UUID
    attempt: int
    delivered: bool
    # When to try again; None when delivered or given up.
    retry_in: datetime.timedelta | None
    status_code: int | None
    latency_ms: float | None
    error: str
    response: str
    # Why its endpoint is now disabled (a 410 Gone); None to leave it be.
    disable: str | None = None


@dataclass(frozen=True, slots=True)
class InboxItemView:
    """An inbox item as a webhook names it: its title and its newest ask."""

    item_id: uuid.UUID
    key: str
    title: str
    ask: Ask | None
    ask_status: AskStatus | None
    close_reason: str


@dataclass(frozen=True, slots=True)
class Directory:
    """Names the events of one page of the log refer to."""

    workspace_id: uuid.UUID
    # channel id → (name, kind)
    channels: dict[uuid.UUID, tuple[str, ChannelKind]]
    handles: dict[uuid.UUID, str]
    items: dict[uuid.UUID, InboxItemView]
    # For an email endpoint: person → (handle, email, their email preference)
    # for the named answerers and channel members of the page's asks.
    people: dict[uuid.UUID, tuple[str, str, str]] = field(default_factory=dict)
    # channel id → its human members
    members: dict[uuid.UUID, tuple[uuid.UUID, ...]] = field(default_factory=dict)
    # For a push endpoint: person → whether they chose push (None: the
    # default), and person → their push subscriptions.
    push: dict[uuid.UUID, bool | None] = field(default_factory=dict)
    subscriptions: dict[uuid.UUID, tuple[uuid.UUID, ...]] = field(default_factory=dict)
    # For a Slack app: person → (their linked Slack user, whether they chose
    # Slack direct messages; None: the default).
    slack_dm: dict[uuid.UUID, tuple[str, bool | None]] = field(default_factory=dict)
