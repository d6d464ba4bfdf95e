"""Store structs: what the store takes and returns, separate from wire messages."""

from __future__ import annotations

import datetime
import enum
import uuid
from dataclasses import dataclass
from typing import Generic, TypeVar


class AccountKind(enum.StrEnum):
    HUMAN = "human"
    AGENT = "agent"


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


@dataclass(frozen=True, slots=True)
class Actor:
    """Who a call runs as: an account of one workspace."""

    workspace_id: uuid.UUID
    account_id: uuid.UUID
    kind: AccountKind


@dataclass(frozen=True, slots=True)
class RunnerPrincipal:
    workspace_id: uuid.UUID
    runner_id: uuid.UUID


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


@dataclass(frozen=True, slots=True)
class Runner:
    runner_id: uuid.UUID
    workspace_id: uuid.UUID
    name: str


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


@dataclass(frozen=True, slots=True)
class Ask:
    questions: tuple[AskQuestion, ...]
    # Server-owned: minted at append; answered/cancelled never both true.
    ask_id: str = ""
    answered: bool = False
    cancelled: bool = False

    @property
    def is_open(self) -> bool:
        return not self.answered and not self.cancelled


@dataclass(frozen=True, slots=True)
class AskAnswerBlock:
    """The answered snapshot posted by the answerer; server-written only."""

    ask_id: str
    ask_message_id: uuid.UUID
    questions: tuple[AskQuestion, ...]


Block = TextBlock | Ask | AskAnswerBlock


@dataclass(frozen=True, slots=True)
class Answer:
    """One question's answer as RespondToAsk carries it."""

    question_id: str
    chosen_option_ids: tuple[str, ...] = ()
    custom_text: str = ""


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
