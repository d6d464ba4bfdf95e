"""Bounds of an inbox and how an item moves.

An item stands for its newest ask. Its revision moves only when the agent
asks: a post with an ask, or the agent's own close. Answers, a member's close
and the take-backs leave it where it is.
"""

from __future__ import annotations

import dataclasses
import uuid
from dataclasses import dataclass

from compass_server.store.errors import InvalidArgument
from compass_server.store.types import InboxStatus

# Items with an open ask one agent may hold; a post past it is refused.
MAX_OPEN_PER_AGENT = 50
MAX_KEY_CHARS = 200
MAX_TITLE_CHARS = 200
MAX_REASON_CHARS = 1_000
MAX_CLIENT_KEY_CHARS = 128
# A thread read returns the latest this many by default (plus the first and
# the open-ask message); a caller may ask for up to MAX_THREAD_READ.
THREAD_READ = 50
MAX_THREAD_READ = 200
# One page of a thread read, in bytes of blocks as stored (its newest message
# always): 200 of the largest would be ~50 MB per read.
MAX_THREAD_BYTES = 4 << 20
# The pages all thread reads of a process hold at once, and one account's
# part of those; a read waits this long for its bytes, then is refused.
READING_BYTES = 16 << 20
READING_BYTES_PER_ACCOUNT = 8 << 20
READ_WAIT_SECONDS = 5.0


def check_key(key: str) -> None:
    if not key.strip() or len(key) > MAX_KEY_CHARS:
        raise InvalidArgument(f"an inbox key needs 1 to {MAX_KEY_CHARS} characters")


def check_title(title: str) -> None:
    if len(title) > MAX_TITLE_CHARS:
        raise InvalidArgument(f"a title is at most {MAX_TITLE_CHARS} characters")


def check_reason(reason: str) -> None:
    if not reason.strip():
        raise InvalidArgument("an agent's close gives a reason")
    if len(reason) > MAX_REASON_CHARS:
        raise InvalidArgument(f"a close reason is at most {MAX_REASON_CHARS} characters")


def check_client_key(key: str) -> None:
    if not key or len(key) > MAX_CLIENT_KEY_CHARS:
        raise InvalidArgument(
            f"an answer needs a client_key of 1 to {MAX_CLIENT_KEY_CHARS} characters"
        )


def thread_read(requested: int) -> int:
    if requested < 0:
        raise InvalidArgument("message_limit can't be negative")
    return min(requested or THREAD_READ, MAX_THREAD_READ)


@dataclass(frozen=True, slots=True)
class ItemState:
    """The columns of an item that its transitions write."""

    status: InboxStatus
    revision: int
    ask_message_id: uuid.UUID | None
    answered_by: uuid.UUID | None = None
    closed_by: uuid.UUID | None = None


def asked(state: ItemState, ask_message_id: uuid.UUID) -> ItemState:
    """The agent posted an ask: it is the item's now, and the answer clears."""
    return ItemState(InboxStatus.OPEN, state.revision + 1, ask_message_id)


def answered(state: ItemState, member: uuid.UUID) -> ItemState:
    return dataclasses.replace(state, status=InboxStatus.ANSWERED, answered_by=member)


def closed(state: ItemState, by: uuid.UUID, *, by_agent: bool) -> ItemState:
    """Withdrawn: the agent's close is an ask of its own and moves the revision."""
    return dataclasses.replace(
        state,
        status=InboxStatus.CLOSED,
        closed_by=by,
        revision=state.revision + 1 if by_agent else state.revision,
    )


def reopened(state: ItemState) -> ItemState:
    """A take-back: the same ask waits again, at the same revision."""
    return dataclasses.replace(state, status=InboxStatus.OPEN, answered_by=None, closed_by=None)
