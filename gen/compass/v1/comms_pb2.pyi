import datetime

from google.protobuf import duration_pb2 as _duration_pb2
from google.protobuf import timestamp_pb2 as _timestamp_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class ChannelKind(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    CHANNEL_KIND_UNSPECIFIED: _ClassVar[ChannelKind]
    CHANNEL_KIND_CHANNEL: _ClassVar[ChannelKind]
    CHANNEL_KIND_DM: _ClassVar[ChannelKind]

class AskFollowUpStepKind(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    ASK_FOLLOW_UP_STEP_KIND_UNSPECIFIED: _ClassVar[AskFollowUpStepKind]
    ASK_FOLLOW_UP_STEP_KIND_REMINDED: _ClassVar[AskFollowUpStepKind]
    ASK_FOLLOW_UP_STEP_KIND_ESCALATED: _ClassVar[AskFollowUpStepKind]

class QuorumVoteKind(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    QUORUM_VOTE_KIND_UNSPECIFIED: _ClassVar[QuorumVoteKind]
    QUORUM_VOTE_KIND_ANSWER: _ClassVar[QuorumVoteKind]
    QUORUM_VOTE_KIND_DECLINE: _ClassVar[QuorumVoteKind]

class AskEndingKind(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    ASK_ENDING_KIND_UNSPECIFIED: _ClassVar[AskEndingKind]
    ASK_ENDING_KIND_ANSWERED: _ClassVar[AskEndingKind]
    ASK_ENDING_KIND_WITHDRAWN_BY_AGENT: _ClassVar[AskEndingKind]
    ASK_ENDING_KIND_WITHDRAWN_BY_OWNER: _ClassVar[AskEndingKind]
    ASK_ENDING_KIND_DECLINED: _ClassVar[AskEndingKind]
    ASK_ENDING_KIND_EXPIRED: _ClassVar[AskEndingKind]
    ASK_ENDING_KIND_REPLACED: _ClassVar[AskEndingKind]
    ASK_ENDING_KIND_WITHDRAWN_BY_PERSON: _ClassVar[AskEndingKind]

class AskSurface(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    ASK_SURFACE_UNSPECIFIED: _ClassVar[AskSurface]
    ASK_SURFACE_GRPC: _ClassVar[AskSurface]
    ASK_SURFACE_CONNECT: _ClassVar[AskSurface]
    ASK_SURFACE_RELAY: _ClassVar[AskSurface]
    ASK_SURFACE_WEB: _ClassVar[AskSurface]
    ASK_SURFACE_INBOX: _ClassVar[AskSurface]
    ASK_SURFACE_SERVER: _ClassVar[AskSurface]
    ASK_SURFACE_STANDING_ANSWER: _ClassVar[AskSurface]
    ASK_SURFACE_SLACK: _ClassVar[AskSurface]
    ASK_SURFACE_EMAIL: _ClassVar[AskSurface]
    ASK_SURFACE_PUSH: _ClassVar[AskSurface]

class PresenceState(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    PRESENCE_STATE_UNSPECIFIED: _ClassVar[PresenceState]
    PRESENCE_STATE_OFFLINE: _ClassVar[PresenceState]
    PRESENCE_STATE_IDLE: _ClassVar[PresenceState]
    PRESENCE_STATE_WORKING: _ClassVar[PresenceState]
    PRESENCE_STATE_WAITING: _ClassVar[PresenceState]

class PostOutcome(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    POST_OUTCOME_UNSPECIFIED: _ClassVar[PostOutcome]
    POST_OUTCOME_POSTED: _ClassVar[PostOutcome]
    POST_OUTCOME_REPEATED: _ClassVar[PostOutcome]
    POST_OUTCOME_ALREADY_OPEN: _ClassVar[PostOutcome]

class AskHistoryKind(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    ASK_HISTORY_KIND_UNSPECIFIED: _ClassVar[AskHistoryKind]
    ASK_HISTORY_KIND_POSTED: _ClassVar[AskHistoryKind]
    ASK_HISTORY_KIND_ANSWERED: _ClassVar[AskHistoryKind]
    ASK_HISTORY_KIND_WITHDRAWN_BY_AGENT: _ClassVar[AskHistoryKind]
    ASK_HISTORY_KIND_WITHDRAWN_BY_OWNER: _ClassVar[AskHistoryKind]
    ASK_HISTORY_KIND_DECLINED: _ClassVar[AskHistoryKind]
    ASK_HISTORY_KIND_EXPIRED: _ClassVar[AskHistoryKind]
    ASK_HISTORY_KIND_QUORUM_ANSWER: _ClassVar[AskHistoryKind]
    ASK_HISTORY_KIND_QUORUM_DECLINE: _ClassVar[AskHistoryKind]

class AccountKind(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    ACCOUNT_KIND_UNSPECIFIED: _ClassVar[AccountKind]
    ACCOUNT_KIND_HUMAN: _ClassVar[AccountKind]
    ACCOUNT_KIND_AGENT: _ClassVar[AccountKind]

class InboxItemStatus(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    INBOX_ITEM_STATUS_UNSPECIFIED: _ClassVar[InboxItemStatus]
    INBOX_ITEM_STATUS_OPEN: _ClassVar[InboxItemStatus]
    INBOX_ITEM_STATUS_ANSWERED: _ClassVar[InboxItemStatus]
    INBOX_ITEM_STATUS_CLOSED: _ClassVar[InboxItemStatus]
    INBOX_ITEM_STATUS_NOTE: _ClassVar[InboxItemStatus]
CHANNEL_KIND_UNSPECIFIED: ChannelKind
CHANNEL_KIND_CHANNEL: ChannelKind
CHANNEL_KIND_DM: ChannelKind
ASK_FOLLOW_UP_STEP_KIND_UNSPECIFIED: AskFollowUpStepKind
ASK_FOLLOW_UP_STEP_KIND_REMINDED: AskFollowUpStepKind
ASK_FOLLOW_UP_STEP_KIND_ESCALATED: AskFollowUpStepKind
QUORUM_VOTE_KIND_UNSPECIFIED: QuorumVoteKind
QUORUM_VOTE_KIND_ANSWER: QuorumVoteKind
QUORUM_VOTE_KIND_DECLINE: QuorumVoteKind
ASK_ENDING_KIND_UNSPECIFIED: AskEndingKind
ASK_ENDING_KIND_ANSWERED: AskEndingKind
ASK_ENDING_KIND_WITHDRAWN_BY_AGENT: AskEndingKind
ASK_ENDING_KIND_WITHDRAWN_BY_OWNER: AskEndingKind
ASK_ENDING_KIND_DECLINED: AskEndingKind
ASK_ENDING_KIND_EXPIRED: AskEndingKind
ASK_ENDING_KIND_REPLACED: AskEndingKind
ASK_ENDING_KIND_WITHDRAWN_BY_PERSON: AskEndingKind
ASK_SURFACE_UNSPECIFIED: AskSurface
ASK_SURFACE_GRPC: AskSurface
ASK_SURFACE_CONNECT: AskSurface
ASK_SURFACE_RELAY: AskSurface
ASK_SURFACE_WEB: AskSurface
ASK_SURFACE_INBOX: AskSurface
ASK_SURFACE_SERVER: AskSurface
ASK_SURFACE_STANDING_ANSWER: AskSurface
ASK_SURFACE_SLACK: AskSurface
ASK_SURFACE_EMAIL: AskSurface
ASK_SURFACE_PUSH: AskSurface
PRESENCE_STATE_UNSPECIFIED: PresenceState
PRESENCE_STATE_OFFLINE: PresenceState
PRESENCE_STATE_IDLE: PresenceState
PRESENCE_STATE_WORKING: PresenceState
PRESENCE_STATE_WAITING: PresenceState
POST_OUTCOME_UNSPECIFIED: PostOutcome
POST_OUTCOME_POSTED: PostOutcome
POST_OUTCOME_REPEATED: PostOutcome
POST_OUTCOME_ALREADY_OPEN: PostOutcome
ASK_HISTORY_KIND_UNSPECIFIED: AskHistoryKind
ASK_HISTORY_KIND_POSTED: AskHistoryKind
ASK_HISTORY_KIND_ANSWERED: AskHistoryKind
ASK_HISTORY_KIND_WITHDRAWN_BY_AGENT: AskHistoryKind
ASK_HISTORY_KIND_WITHDRAWN_BY_OWNER: AskHistoryKind
ASK_HISTORY_KIND_DECLINED: AskHistoryKind
ASK_HISTORY_KIND_EXPIRED: AskHistoryKind
ASK_HISTORY_KIND_QUORUM_ANSWER: AskHistoryKind
ASK_HISTORY_KIND_QUORUM_DECLINE: AskHistoryKind
ACCOUNT_KIND_UNSPECIFIED: AccountKind
ACCOUNT_KIND_HUMAN: AccountKind
ACCOUNT_KIND_AGENT: AccountKind
INBOX_ITEM_STATUS_UNSPECIFIED: InboxItemStatus
INBOX_ITEM_STATUS_OPEN: InboxItemStatus
INBOX_ITEM_STATUS_ANSWERED: InboxItemStatus
INBOX_ITEM_STATUS_CLOSED: InboxItemStatus
INBOX_ITEM_STATUS_NOTE: InboxItemStatus

class Channel(_message.Message):
    __slots__ = ("channel_id", "name", "topic", "kind", "member_account_ids", "created_at")
    CHANNEL_ID_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    TOPIC_FIELD_NUMBER: _ClassVar[int]
    KIND_FIELD_NUMBER: _ClassVar[int]
    MEMBER_ACCOUNT_IDS_FIELD_NUMBER: _ClassVar[int]
    CREATED_AT_FIELD_NUMBER: _ClassVar[int]
    channel_id: str
    name: str
    topic: str
    kind: ChannelKind
    member_account_ids: _containers.RepeatedScalarFieldContainer[str]
    created_at: _timestamp_pb2.Timestamp
    def __init__(self, channel_id: _Optional[str] = ..., name: _Optional[str] = ..., topic: _Optional[str] = ..., kind: _Optional[_Union[ChannelKind, str]] = ..., member_account_ids: _Optional[_Iterable[str]] = ..., created_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ...) -> None: ...

class TextBlock(_message.Message):
    __slots__ = ("text",)
    TEXT_FIELD_NUMBER: _ClassVar[int]
    text: str
    def __init__(self, text: _Optional[str] = ...) -> None: ...

class Ask(_message.Message):
    __slots__ = ("ask_id", "questions", "answered", "cancelled", "deadline", "timeout", "answerer_account_ids", "answerer_handles", "ending", "quorum", "declines_count_against_quorum", "quorum_votes", "follow_up", "follow_up_steps")
    ASK_ID_FIELD_NUMBER: _ClassVar[int]
    QUESTIONS_FIELD_NUMBER: _ClassVar[int]
    ANSWERED_FIELD_NUMBER: _ClassVar[int]
    CANCELLED_FIELD_NUMBER: _ClassVar[int]
    DEADLINE_FIELD_NUMBER: _ClassVar[int]
    TIMEOUT_FIELD_NUMBER: _ClassVar[int]
    ANSWERER_ACCOUNT_IDS_FIELD_NUMBER: _ClassVar[int]
    ANSWERER_HANDLES_FIELD_NUMBER: _ClassVar[int]
    ENDING_FIELD_NUMBER: _ClassVar[int]
    QUORUM_FIELD_NUMBER: _ClassVar[int]
    DECLINES_COUNT_AGAINST_QUORUM_FIELD_NUMBER: _ClassVar[int]
    QUORUM_VOTES_FIELD_NUMBER: _ClassVar[int]
    FOLLOW_UP_FIELD_NUMBER: _ClassVar[int]
    FOLLOW_UP_STEPS_FIELD_NUMBER: _ClassVar[int]
    ask_id: str
    questions: _containers.RepeatedCompositeFieldContainer[AskQuestion]
    answered: bool
    cancelled: bool
    deadline: _timestamp_pb2.Timestamp
    timeout: _duration_pb2.Duration
    answerer_account_ids: _containers.RepeatedScalarFieldContainer[str]
    answerer_handles: _containers.RepeatedScalarFieldContainer[str]
    ending: AskEnding
    quorum: int
    declines_count_against_quorum: bool
    quorum_votes: _containers.RepeatedCompositeFieldContainer[QuorumVote]
    follow_up: AskFollowUp
    follow_up_steps: _containers.RepeatedCompositeFieldContainer[AskFollowUpStep]
    def __init__(self, ask_id: _Optional[str] = ..., questions: _Optional[_Iterable[_Union[AskQuestion, _Mapping]]] = ..., answered: _Optional[bool] = ..., cancelled: _Optional[bool] = ..., deadline: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., timeout: _Optional[_Union[datetime.timedelta, _duration_pb2.Duration, _Mapping]] = ..., answerer_account_ids: _Optional[_Iterable[str]] = ..., answerer_handles: _Optional[_Iterable[str]] = ..., ending: _Optional[_Union[AskEnding, _Mapping]] = ..., quorum: _Optional[int] = ..., declines_count_against_quorum: _Optional[bool] = ..., quorum_votes: _Optional[_Iterable[_Union[QuorumVote, _Mapping]]] = ..., follow_up: _Optional[_Union[AskFollowUp, _Mapping]] = ..., follow_up_steps: _Optional[_Iterable[_Union[AskFollowUpStep, _Mapping]]] = ...) -> None: ...

class AskFollowUp(_message.Message):
    __slots__ = ("remind_after", "remind_times", "escalate_after", "escalate_to_account_ids", "escalate_to_owner", "escalate_to_channel_id")
    REMIND_AFTER_FIELD_NUMBER: _ClassVar[int]
    REMIND_TIMES_FIELD_NUMBER: _ClassVar[int]
    ESCALATE_AFTER_FIELD_NUMBER: _ClassVar[int]
    ESCALATE_TO_ACCOUNT_IDS_FIELD_NUMBER: _ClassVar[int]
    ESCALATE_TO_OWNER_FIELD_NUMBER: _ClassVar[int]
    ESCALATE_TO_CHANNEL_ID_FIELD_NUMBER: _ClassVar[int]
    remind_after: _duration_pb2.Duration
    remind_times: int
    escalate_after: _duration_pb2.Duration
    escalate_to_account_ids: _containers.RepeatedScalarFieldContainer[str]
    escalate_to_owner: bool
    escalate_to_channel_id: str
    def __init__(self, remind_after: _Optional[_Union[datetime.timedelta, _duration_pb2.Duration, _Mapping]] = ..., remind_times: _Optional[int] = ..., escalate_after: _Optional[_Union[datetime.timedelta, _duration_pb2.Duration, _Mapping]] = ..., escalate_to_account_ids: _Optional[_Iterable[str]] = ..., escalate_to_owner: _Optional[bool] = ..., escalate_to_channel_id: _Optional[str] = ...) -> None: ...

class AskFollowUpStep(_message.Message):
    __slots__ = ("kind", "at", "account_ids", "urgent", "reposted_channel_id", "repost_message_id")
    KIND_FIELD_NUMBER: _ClassVar[int]
    AT_FIELD_NUMBER: _ClassVar[int]
    ACCOUNT_IDS_FIELD_NUMBER: _ClassVar[int]
    URGENT_FIELD_NUMBER: _ClassVar[int]
    REPOSTED_CHANNEL_ID_FIELD_NUMBER: _ClassVar[int]
    REPOST_MESSAGE_ID_FIELD_NUMBER: _ClassVar[int]
    kind: AskFollowUpStepKind
    at: _timestamp_pb2.Timestamp
    account_ids: _containers.RepeatedScalarFieldContainer[str]
    urgent: bool
    reposted_channel_id: str
    repost_message_id: str
    def __init__(self, kind: _Optional[_Union[AskFollowUpStepKind, str]] = ..., at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., account_ids: _Optional[_Iterable[str]] = ..., urgent: _Optional[bool] = ..., reposted_channel_id: _Optional[str] = ..., repost_message_id: _Optional[str] = ...) -> None: ...

class QuorumVote(_message.Message):
    __slots__ = ("account_id", "handle", "kind", "answers", "reason", "at", "surface", "standing_answer_id")
    ACCOUNT_ID_FIELD_NUMBER: _ClassVar[int]
    HANDLE_FIELD_NUMBER: _ClassVar[int]
    KIND_FIELD_NUMBER: _ClassVar[int]
    ANSWERS_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    AT_FIELD_NUMBER: _ClassVar[int]
    SURFACE_FIELD_NUMBER: _ClassVar[int]
    STANDING_ANSWER_ID_FIELD_NUMBER: _ClassVar[int]
    account_id: str
    handle: str
    kind: QuorumVoteKind
    answers: _containers.RepeatedCompositeFieldContainer[QuorumAnswer]
    reason: str
    at: _timestamp_pb2.Timestamp
    surface: AskSurface
    standing_answer_id: str
    def __init__(self, account_id: _Optional[str] = ..., handle: _Optional[str] = ..., kind: _Optional[_Union[QuorumVoteKind, str]] = ..., answers: _Optional[_Iterable[_Union[QuorumAnswer, _Mapping]]] = ..., reason: _Optional[str] = ..., at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., surface: _Optional[_Union[AskSurface, str]] = ..., standing_answer_id: _Optional[str] = ...) -> None: ...

class QuorumAnswer(_message.Message):
    __slots__ = ("question_id", "chosen_option_ids", "custom_text")
    QUESTION_ID_FIELD_NUMBER: _ClassVar[int]
    CHOSEN_OPTION_IDS_FIELD_NUMBER: _ClassVar[int]
    CUSTOM_TEXT_FIELD_NUMBER: _ClassVar[int]
    question_id: str
    chosen_option_ids: _containers.RepeatedScalarFieldContainer[str]
    custom_text: str
    def __init__(self, question_id: _Optional[str] = ..., chosen_option_ids: _Optional[_Iterable[str]] = ..., custom_text: _Optional[str] = ...) -> None: ...

class AskEnding(_message.Message):
    __slots__ = ("kind", "actor_account_id", "actor_handle", "ended_at", "surface", "reason", "standing_answer_id", "receipt")
    KIND_FIELD_NUMBER: _ClassVar[int]
    ACTOR_ACCOUNT_ID_FIELD_NUMBER: _ClassVar[int]
    ACTOR_HANDLE_FIELD_NUMBER: _ClassVar[int]
    ENDED_AT_FIELD_NUMBER: _ClassVar[int]
    SURFACE_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    STANDING_ANSWER_ID_FIELD_NUMBER: _ClassVar[int]
    RECEIPT_FIELD_NUMBER: _ClassVar[int]
    kind: AskEndingKind
    actor_account_id: str
    actor_handle: str
    ended_at: _timestamp_pb2.Timestamp
    surface: AskSurface
    reason: str
    standing_answer_id: str
    receipt: str
    def __init__(self, kind: _Optional[_Union[AskEndingKind, str]] = ..., actor_account_id: _Optional[str] = ..., actor_handle: _Optional[str] = ..., ended_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., surface: _Optional[_Union[AskSurface, str]] = ..., reason: _Optional[str] = ..., standing_answer_id: _Optional[str] = ..., receipt: _Optional[str] = ...) -> None: ...

class AskQuestion(_message.Message):
    __slots__ = ("question_id", "question", "header", "options", "allow_multiple", "recommended", "chosen_option_ids", "custom_text", "timed_out")
    QUESTION_ID_FIELD_NUMBER: _ClassVar[int]
    QUESTION_FIELD_NUMBER: _ClassVar[int]
    HEADER_FIELD_NUMBER: _ClassVar[int]
    OPTIONS_FIELD_NUMBER: _ClassVar[int]
    ALLOW_MULTIPLE_FIELD_NUMBER: _ClassVar[int]
    RECOMMENDED_FIELD_NUMBER: _ClassVar[int]
    CHOSEN_OPTION_IDS_FIELD_NUMBER: _ClassVar[int]
    CUSTOM_TEXT_FIELD_NUMBER: _ClassVar[int]
    TIMED_OUT_FIELD_NUMBER: _ClassVar[int]
    question_id: str
    question: str
    header: str
    options: _containers.RepeatedCompositeFieldContainer[AskOption]
    allow_multiple: bool
    recommended: int
    chosen_option_ids: _containers.RepeatedScalarFieldContainer[str]
    custom_text: str
    timed_out: bool
    def __init__(self, question_id: _Optional[str] = ..., question: _Optional[str] = ..., header: _Optional[str] = ..., options: _Optional[_Iterable[_Union[AskOption, _Mapping]]] = ..., allow_multiple: _Optional[bool] = ..., recommended: _Optional[int] = ..., chosen_option_ids: _Optional[_Iterable[str]] = ..., custom_text: _Optional[str] = ..., timed_out: _Optional[bool] = ...) -> None: ...

class AskOption(_message.Message):
    __slots__ = ("id", "label", "description", "preview")
    ID_FIELD_NUMBER: _ClassVar[int]
    LABEL_FIELD_NUMBER: _ClassVar[int]
    DESCRIPTION_FIELD_NUMBER: _ClassVar[int]
    PREVIEW_FIELD_NUMBER: _ClassVar[int]
    id: str
    label: str
    description: str
    preview: str
    def __init__(self, id: _Optional[str] = ..., label: _Optional[str] = ..., description: _Optional[str] = ..., preview: _Optional[str] = ...) -> None: ...

class AskAnswerBlock(_message.Message):
    __slots__ = ("ask_id", "ask_message_id", "questions", "quorum_votes", "receipt")
    ASK_ID_FIELD_NUMBER: _ClassVar[int]
    ASK_MESSAGE_ID_FIELD_NUMBER: _ClassVar[int]
    QUESTIONS_FIELD_NUMBER: _ClassVar[int]
    QUORUM_VOTES_FIELD_NUMBER: _ClassVar[int]
    RECEIPT_FIELD_NUMBER: _ClassVar[int]
    ask_id: str
    ask_message_id: str
    questions: _containers.RepeatedCompositeFieldContainer[AskQuestion]
    quorum_votes: _containers.RepeatedCompositeFieldContainer[QuorumVote]
    receipt: str
    def __init__(self, ask_id: _Optional[str] = ..., ask_message_id: _Optional[str] = ..., questions: _Optional[_Iterable[_Union[AskQuestion, _Mapping]]] = ..., quorum_votes: _Optional[_Iterable[_Union[QuorumVote, _Mapping]]] = ..., receipt: _Optional[str] = ...) -> None: ...

class MessageBlock(_message.Message):
    __slots__ = ("text", "ask", "ask_answer")
    TEXT_FIELD_NUMBER: _ClassVar[int]
    ASK_FIELD_NUMBER: _ClassVar[int]
    ASK_ANSWER_FIELD_NUMBER: _ClassVar[int]
    text: TextBlock
    ask: Ask
    ask_answer: AskAnswerBlock
    def __init__(self, text: _Optional[_Union[TextBlock, _Mapping]] = ..., ask: _Optional[_Union[Ask, _Mapping]] = ..., ask_answer: _Optional[_Union[AskAnswerBlock, _Mapping]] = ...) -> None: ...

class Message(_message.Message):
    __slots__ = ("message_id", "channel_id", "author_account_id", "blocks", "created_at", "author_handle")
    MESSAGE_ID_FIELD_NUMBER: _ClassVar[int]
    CHANNEL_ID_FIELD_NUMBER: _ClassVar[int]
    AUTHOR_ACCOUNT_ID_FIELD_NUMBER: _ClassVar[int]
    BLOCKS_FIELD_NUMBER: _ClassVar[int]
    CREATED_AT_FIELD_NUMBER: _ClassVar[int]
    AUTHOR_HANDLE_FIELD_NUMBER: _ClassVar[int]
    message_id: str
    channel_id: str
    author_account_id: str
    blocks: _containers.RepeatedCompositeFieldContainer[MessageBlock]
    created_at: _timestamp_pb2.Timestamp
    author_handle: str
    def __init__(self, message_id: _Optional[str] = ..., channel_id: _Optional[str] = ..., author_account_id: _Optional[str] = ..., blocks: _Optional[_Iterable[_Union[MessageBlock, _Mapping]]] = ..., created_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., author_handle: _Optional[str] = ...) -> None: ...

class Presence(_message.Message):
    __slots__ = ("account_id", "state", "status_text")
    ACCOUNT_ID_FIELD_NUMBER: _ClassVar[int]
    STATE_FIELD_NUMBER: _ClassVar[int]
    STATUS_TEXT_FIELD_NUMBER: _ClassVar[int]
    account_id: str
    state: PresenceState
    status_text: str
    def __init__(self, account_id: _Optional[str] = ..., state: _Optional[_Union[PresenceState, str]] = ..., status_text: _Optional[str] = ...) -> None: ...

class CreateChannelRequest(_message.Message):
    __slots__ = ("name", "topic", "member_account_ids")
    NAME_FIELD_NUMBER: _ClassVar[int]
    TOPIC_FIELD_NUMBER: _ClassVar[int]
    MEMBER_ACCOUNT_IDS_FIELD_NUMBER: _ClassVar[int]
    name: str
    topic: str
    member_account_ids: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, name: _Optional[str] = ..., topic: _Optional[str] = ..., member_account_ids: _Optional[_Iterable[str]] = ...) -> None: ...

class CreateChannelResponse(_message.Message):
    __slots__ = ("channel",)
    CHANNEL_FIELD_NUMBER: _ClassVar[int]
    channel: Channel
    def __init__(self, channel: _Optional[_Union[Channel, _Mapping]] = ...) -> None: ...

class ListChannelsRequest(_message.Message):
    __slots__ = ("page_size", "page_token")
    PAGE_SIZE_FIELD_NUMBER: _ClassVar[int]
    PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    page_size: int
    page_token: str
    def __init__(self, page_size: _Optional[int] = ..., page_token: _Optional[str] = ...) -> None: ...

class ListChannelsResponse(_message.Message):
    __slots__ = ("channels", "next_page_token")
    CHANNELS_FIELD_NUMBER: _ClassVar[int]
    NEXT_PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    channels: _containers.RepeatedCompositeFieldContainer[Channel]
    next_page_token: str
    def __init__(self, channels: _Optional[_Iterable[_Union[Channel, _Mapping]]] = ..., next_page_token: _Optional[str] = ...) -> None: ...

class OpenDMRequest(_message.Message):
    __slots__ = ("account_id",)
    ACCOUNT_ID_FIELD_NUMBER: _ClassVar[int]
    account_id: str
    def __init__(self, account_id: _Optional[str] = ...) -> None: ...

class OpenDMResponse(_message.Message):
    __slots__ = ("channel",)
    CHANNEL_FIELD_NUMBER: _ClassVar[int]
    channel: Channel
    def __init__(self, channel: _Optional[_Union[Channel, _Mapping]] = ...) -> None: ...

class AddChannelMemberRequest(_message.Message):
    __slots__ = ("channel_id", "account_id")
    CHANNEL_ID_FIELD_NUMBER: _ClassVar[int]
    ACCOUNT_ID_FIELD_NUMBER: _ClassVar[int]
    channel_id: str
    account_id: str
    def __init__(self, channel_id: _Optional[str] = ..., account_id: _Optional[str] = ...) -> None: ...

class AddChannelMemberResponse(_message.Message):
    __slots__ = ("channel",)
    CHANNEL_FIELD_NUMBER: _ClassVar[int]
    channel: Channel
    def __init__(self, channel: _Optional[_Union[Channel, _Mapping]] = ...) -> None: ...

class UpdateTopicRequest(_message.Message):
    __slots__ = ("channel_id", "topic")
    CHANNEL_ID_FIELD_NUMBER: _ClassVar[int]
    TOPIC_FIELD_NUMBER: _ClassVar[int]
    channel_id: str
    topic: str
    def __init__(self, channel_id: _Optional[str] = ..., topic: _Optional[str] = ...) -> None: ...

class UpdateTopicResponse(_message.Message):
    __slots__ = ("channel",)
    CHANNEL_FIELD_NUMBER: _ClassVar[int]
    channel: Channel
    def __init__(self, channel: _Optional[_Union[Channel, _Mapping]] = ...) -> None: ...

class SetChannelFollowUpDefaultRequest(_message.Message):
    __slots__ = ("channel_id", "follow_up")
    CHANNEL_ID_FIELD_NUMBER: _ClassVar[int]
    FOLLOW_UP_FIELD_NUMBER: _ClassVar[int]
    channel_id: str
    follow_up: AskFollowUp
    def __init__(self, channel_id: _Optional[str] = ..., follow_up: _Optional[_Union[AskFollowUp, _Mapping]] = ...) -> None: ...

class SetChannelFollowUpDefaultResponse(_message.Message):
    __slots__ = ("follow_up",)
    FOLLOW_UP_FIELD_NUMBER: _ClassVar[int]
    follow_up: AskFollowUp
    def __init__(self, follow_up: _Optional[_Union[AskFollowUp, _Mapping]] = ...) -> None: ...

class GetChannelFollowUpDefaultRequest(_message.Message):
    __slots__ = ("channel_id",)
    CHANNEL_ID_FIELD_NUMBER: _ClassVar[int]
    channel_id: str
    def __init__(self, channel_id: _Optional[str] = ...) -> None: ...

class GetChannelFollowUpDefaultResponse(_message.Message):
    __slots__ = ("follow_up",)
    FOLLOW_UP_FIELD_NUMBER: _ClassVar[int]
    follow_up: AskFollowUp
    def __init__(self, follow_up: _Optional[_Union[AskFollowUp, _Mapping]] = ...) -> None: ...

class PostMessageRequest(_message.Message):
    __slots__ = ("channel_id", "blocks", "client_key", "allow_identical")
    CHANNEL_ID_FIELD_NUMBER: _ClassVar[int]
    BLOCKS_FIELD_NUMBER: _ClassVar[int]
    CLIENT_KEY_FIELD_NUMBER: _ClassVar[int]
    ALLOW_IDENTICAL_FIELD_NUMBER: _ClassVar[int]
    channel_id: str
    blocks: _containers.RepeatedCompositeFieldContainer[MessageBlock]
    client_key: str
    allow_identical: bool
    def __init__(self, channel_id: _Optional[str] = ..., blocks: _Optional[_Iterable[_Union[MessageBlock, _Mapping]]] = ..., client_key: _Optional[str] = ..., allow_identical: _Optional[bool] = ...) -> None: ...

class PostMessageResponse(_message.Message):
    __slots__ = ("message", "outcome")
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    OUTCOME_FIELD_NUMBER: _ClassVar[int]
    message: Message
    outcome: PostOutcome
    def __init__(self, message: _Optional[_Union[Message, _Mapping]] = ..., outcome: _Optional[_Union[PostOutcome, str]] = ...) -> None: ...

class ListMessagesRequest(_message.Message):
    __slots__ = ("channel_id", "page_size", "page_token")
    CHANNEL_ID_FIELD_NUMBER: _ClassVar[int]
    PAGE_SIZE_FIELD_NUMBER: _ClassVar[int]
    PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    channel_id: str
    page_size: int
    page_token: str
    def __init__(self, channel_id: _Optional[str] = ..., page_size: _Optional[int] = ..., page_token: _Optional[str] = ...) -> None: ...

class ListMessagesResponse(_message.Message):
    __slots__ = ("messages", "next_page_token")
    MESSAGES_FIELD_NUMBER: _ClassVar[int]
    NEXT_PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    messages: _containers.RepeatedCompositeFieldContainer[Message]
    next_page_token: str
    def __init__(self, messages: _Optional[_Iterable[_Union[Message, _Mapping]]] = ..., next_page_token: _Optional[str] = ...) -> None: ...

class GetMessageRequest(_message.Message):
    __slots__ = ("message_id",)
    MESSAGE_ID_FIELD_NUMBER: _ClassVar[int]
    message_id: str
    def __init__(self, message_id: _Optional[str] = ...) -> None: ...

class GetMessageResponse(_message.Message):
    __slots__ = ("message",)
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    message: Message
    def __init__(self, message: _Optional[_Union[Message, _Mapping]] = ...) -> None: ...

class SearchMessagesRequest(_message.Message):
    __slots__ = ("query", "channel_id", "page_size", "page_token")
    QUERY_FIELD_NUMBER: _ClassVar[int]
    CHANNEL_ID_FIELD_NUMBER: _ClassVar[int]
    PAGE_SIZE_FIELD_NUMBER: _ClassVar[int]
    PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    query: str
    channel_id: str
    page_size: int
    page_token: str
    def __init__(self, query: _Optional[str] = ..., channel_id: _Optional[str] = ..., page_size: _Optional[int] = ..., page_token: _Optional[str] = ...) -> None: ...

class SearchMessagesResponse(_message.Message):
    __slots__ = ("messages", "next_page_token")
    MESSAGES_FIELD_NUMBER: _ClassVar[int]
    NEXT_PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    messages: _containers.RepeatedCompositeFieldContainer[Message]
    next_page_token: str
    def __init__(self, messages: _Optional[_Iterable[_Union[Message, _Mapping]]] = ..., next_page_token: _Optional[str] = ...) -> None: ...

class RespondToAskRequest(_message.Message):
    __slots__ = ("ask_id", "answers", "standing")
    ASK_ID_FIELD_NUMBER: _ClassVar[int]
    ANSWERS_FIELD_NUMBER: _ClassVar[int]
    STANDING_FIELD_NUMBER: _ClassVar[int]
    ask_id: str
    answers: _containers.RepeatedCompositeFieldContainer[AskQuestionAnswer]
    standing: StandingAnswerTerms
    def __init__(self, ask_id: _Optional[str] = ..., answers: _Optional[_Iterable[_Union[AskQuestionAnswer, _Mapping]]] = ..., standing: _Optional[_Union[StandingAnswerTerms, _Mapping]] = ...) -> None: ...

class StandingAnswerTerms(_message.Message):
    __slots__ = ("duration", "include_subagents")
    DURATION_FIELD_NUMBER: _ClassVar[int]
    INCLUDE_SUBAGENTS_FIELD_NUMBER: _ClassVar[int]
    duration: _duration_pb2.Duration
    include_subagents: bool
    def __init__(self, duration: _Optional[_Union[datetime.timedelta, _duration_pb2.Duration, _Mapping]] = ..., include_subagents: _Optional[bool] = ...) -> None: ...

class StandingAnswer(_message.Message):
    __slots__ = ("standing_answer_id", "account_id", "handle", "agent_account_id", "agent_handle", "include_subagents", "questions", "made_from_ask_id", "created_at", "expires_at", "revoked_at", "asks_answered")
    STANDING_ANSWER_ID_FIELD_NUMBER: _ClassVar[int]
    ACCOUNT_ID_FIELD_NUMBER: _ClassVar[int]
    HANDLE_FIELD_NUMBER: _ClassVar[int]
    AGENT_ACCOUNT_ID_FIELD_NUMBER: _ClassVar[int]
    AGENT_HANDLE_FIELD_NUMBER: _ClassVar[int]
    INCLUDE_SUBAGENTS_FIELD_NUMBER: _ClassVar[int]
    QUESTIONS_FIELD_NUMBER: _ClassVar[int]
    MADE_FROM_ASK_ID_FIELD_NUMBER: _ClassVar[int]
    CREATED_AT_FIELD_NUMBER: _ClassVar[int]
    EXPIRES_AT_FIELD_NUMBER: _ClassVar[int]
    REVOKED_AT_FIELD_NUMBER: _ClassVar[int]
    ASKS_ANSWERED_FIELD_NUMBER: _ClassVar[int]
    standing_answer_id: str
    account_id: str
    handle: str
    agent_account_id: str
    agent_handle: str
    include_subagents: bool
    questions: _containers.RepeatedCompositeFieldContainer[AskQuestion]
    made_from_ask_id: str
    created_at: _timestamp_pb2.Timestamp
    expires_at: _timestamp_pb2.Timestamp
    revoked_at: _timestamp_pb2.Timestamp
    asks_answered: int
    def __init__(self, standing_answer_id: _Optional[str] = ..., account_id: _Optional[str] = ..., handle: _Optional[str] = ..., agent_account_id: _Optional[str] = ..., agent_handle: _Optional[str] = ..., include_subagents: _Optional[bool] = ..., questions: _Optional[_Iterable[_Union[AskQuestion, _Mapping]]] = ..., made_from_ask_id: _Optional[str] = ..., created_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., expires_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., revoked_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., asks_answered: _Optional[int] = ...) -> None: ...

class ListStandingAnswersRequest(_message.Message):
    __slots__ = ("include_ended",)
    INCLUDE_ENDED_FIELD_NUMBER: _ClassVar[int]
    include_ended: bool
    def __init__(self, include_ended: _Optional[bool] = ...) -> None: ...

class ListStandingAnswersResponse(_message.Message):
    __slots__ = ("standing_answers",)
    STANDING_ANSWERS_FIELD_NUMBER: _ClassVar[int]
    standing_answers: _containers.RepeatedCompositeFieldContainer[StandingAnswer]
    def __init__(self, standing_answers: _Optional[_Iterable[_Union[StandingAnswer, _Mapping]]] = ...) -> None: ...

class RevokeStandingAnswerRequest(_message.Message):
    __slots__ = ("standing_answer_id",)
    STANDING_ANSWER_ID_FIELD_NUMBER: _ClassVar[int]
    standing_answer_id: str
    def __init__(self, standing_answer_id: _Optional[str] = ...) -> None: ...

class RevokeStandingAnswerResponse(_message.Message):
    __slots__ = ("standing_answer",)
    STANDING_ANSWER_FIELD_NUMBER: _ClassVar[int]
    standing_answer: StandingAnswer
    def __init__(self, standing_answer: _Optional[_Union[StandingAnswer, _Mapping]] = ...) -> None: ...

class DeclineAskRequest(_message.Message):
    __slots__ = ("ask_id", "reason")
    ASK_ID_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    ask_id: str
    reason: str
    def __init__(self, ask_id: _Optional[str] = ..., reason: _Optional[str] = ...) -> None: ...

class DeclineAskResponse(_message.Message):
    __slots__ = ("ask_message",)
    ASK_MESSAGE_FIELD_NUMBER: _ClassVar[int]
    ask_message: Message
    def __init__(self, ask_message: _Optional[_Union[Message, _Mapping]] = ...) -> None: ...

class WithdrawAskRequest(_message.Message):
    __slots__ = ("ask_id",)
    ASK_ID_FIELD_NUMBER: _ClassVar[int]
    ask_id: str
    def __init__(self, ask_id: _Optional[str] = ...) -> None: ...

class WithdrawAskResponse(_message.Message):
    __slots__ = ("ask_message",)
    ASK_MESSAGE_FIELD_NUMBER: _ClassVar[int]
    ask_message: Message
    def __init__(self, ask_message: _Optional[_Union[Message, _Mapping]] = ...) -> None: ...

class GetAskHistoryRequest(_message.Message):
    __slots__ = ("ask_id",)
    ASK_ID_FIELD_NUMBER: _ClassVar[int]
    ask_id: str
    def __init__(self, ask_id: _Optional[str] = ...) -> None: ...

class AskHistoryEntry(_message.Message):
    __slots__ = ("kind", "actor_account_id", "actor_handle", "at", "surface", "reason", "standing_answer_id", "receipt")
    KIND_FIELD_NUMBER: _ClassVar[int]
    ACTOR_ACCOUNT_ID_FIELD_NUMBER: _ClassVar[int]
    ACTOR_HANDLE_FIELD_NUMBER: _ClassVar[int]
    AT_FIELD_NUMBER: _ClassVar[int]
    SURFACE_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    STANDING_ANSWER_ID_FIELD_NUMBER: _ClassVar[int]
    RECEIPT_FIELD_NUMBER: _ClassVar[int]
    kind: AskHistoryKind
    actor_account_id: str
    actor_handle: str
    at: _timestamp_pb2.Timestamp
    surface: AskSurface
    reason: str
    standing_answer_id: str
    receipt: str
    def __init__(self, kind: _Optional[_Union[AskHistoryKind, str]] = ..., actor_account_id: _Optional[str] = ..., actor_handle: _Optional[str] = ..., at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., surface: _Optional[_Union[AskSurface, str]] = ..., reason: _Optional[str] = ..., standing_answer_id: _Optional[str] = ..., receipt: _Optional[str] = ...) -> None: ...

class GetAskHistoryResponse(_message.Message):
    __slots__ = ("ask_id", "entries", "caller_may_answer", "caller_may_withdraw")
    ASK_ID_FIELD_NUMBER: _ClassVar[int]
    ENTRIES_FIELD_NUMBER: _ClassVar[int]
    CALLER_MAY_ANSWER_FIELD_NUMBER: _ClassVar[int]
    CALLER_MAY_WITHDRAW_FIELD_NUMBER: _ClassVar[int]
    ask_id: str
    entries: _containers.RepeatedCompositeFieldContainer[AskHistoryEntry]
    caller_may_answer: bool
    caller_may_withdraw: bool
    def __init__(self, ask_id: _Optional[str] = ..., entries: _Optional[_Iterable[_Union[AskHistoryEntry, _Mapping]]] = ..., caller_may_answer: _Optional[bool] = ..., caller_may_withdraw: _Optional[bool] = ...) -> None: ...

class AskQuestionAnswer(_message.Message):
    __slots__ = ("question_id", "chosen_option_ids", "custom_text")
    QUESTION_ID_FIELD_NUMBER: _ClassVar[int]
    CHOSEN_OPTION_IDS_FIELD_NUMBER: _ClassVar[int]
    CUSTOM_TEXT_FIELD_NUMBER: _ClassVar[int]
    question_id: str
    chosen_option_ids: _containers.RepeatedScalarFieldContainer[str]
    custom_text: str
    def __init__(self, question_id: _Optional[str] = ..., chosen_option_ids: _Optional[_Iterable[str]] = ..., custom_text: _Optional[str] = ...) -> None: ...

class RespondToAskResponse(_message.Message):
    __slots__ = ("ask_message", "answer_message", "standing_answer")
    ASK_MESSAGE_FIELD_NUMBER: _ClassVar[int]
    ANSWER_MESSAGE_FIELD_NUMBER: _ClassVar[int]
    STANDING_ANSWER_FIELD_NUMBER: _ClassVar[int]
    ask_message: Message
    answer_message: Message
    standing_answer: StandingAnswer
    def __init__(self, ask_message: _Optional[_Union[Message, _Mapping]] = ..., answer_message: _Optional[_Union[Message, _Mapping]] = ..., standing_answer: _Optional[_Union[StandingAnswer, _Mapping]] = ...) -> None: ...

class SubscribeRequest(_message.Message):
    __slots__ = ("after_event_id", "presence_of")
    AFTER_EVENT_ID_FIELD_NUMBER: _ClassVar[int]
    PRESENCE_OF_FIELD_NUMBER: _ClassVar[int]
    after_event_id: int
    presence_of: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, after_event_id: _Optional[int] = ..., presence_of: _Optional[_Iterable[str]] = ...) -> None: ...

class GetPresenceRequest(_message.Message):
    __slots__ = ("account_ids", "heard")
    ACCOUNT_IDS_FIELD_NUMBER: _ClassVar[int]
    HEARD_FIELD_NUMBER: _ClassVar[int]
    account_ids: _containers.RepeatedScalarFieldContainer[str]
    heard: bool
    def __init__(self, account_ids: _Optional[_Iterable[str]] = ..., heard: _Optional[bool] = ...) -> None: ...

class GetPresenceResponse(_message.Message):
    __slots__ = ("presences",)
    PRESENCES_FIELD_NUMBER: _ClassVar[int]
    presences: _containers.RepeatedCompositeFieldContainer[Presence]
    def __init__(self, presences: _Optional[_Iterable[_Union[Presence, _Mapping]]] = ...) -> None: ...

class Account(_message.Message):
    __slots__ = ("account_id", "handle", "kind", "parent_account_id")
    ACCOUNT_ID_FIELD_NUMBER: _ClassVar[int]
    HANDLE_FIELD_NUMBER: _ClassVar[int]
    KIND_FIELD_NUMBER: _ClassVar[int]
    PARENT_ACCOUNT_ID_FIELD_NUMBER: _ClassVar[int]
    account_id: str
    handle: str
    kind: AccountKind
    parent_account_id: str
    def __init__(self, account_id: _Optional[str] = ..., handle: _Optional[str] = ..., kind: _Optional[_Union[AccountKind, str]] = ..., parent_account_id: _Optional[str] = ...) -> None: ...

class GetAccountsRequest(_message.Message):
    __slots__ = ("account_ids",)
    ACCOUNT_IDS_FIELD_NUMBER: _ClassVar[int]
    account_ids: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, account_ids: _Optional[_Iterable[str]] = ...) -> None: ...

class GetAccountsResponse(_message.Message):
    __slots__ = ("accounts",)
    ACCOUNTS_FIELD_NUMBER: _ClassVar[int]
    accounts: _containers.RepeatedCompositeFieldContainer[Account]
    def __init__(self, accounts: _Optional[_Iterable[_Union[Account, _Mapping]]] = ...) -> None: ...

class Event(_message.Message):
    __slots__ = ("event_id", "ready", "message_posted", "message_updated", "presence_changed", "channel_changed", "inbox_item_changed")
    EVENT_ID_FIELD_NUMBER: _ClassVar[int]
    READY_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_POSTED_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_UPDATED_FIELD_NUMBER: _ClassVar[int]
    PRESENCE_CHANGED_FIELD_NUMBER: _ClassVar[int]
    CHANNEL_CHANGED_FIELD_NUMBER: _ClassVar[int]
    INBOX_ITEM_CHANGED_FIELD_NUMBER: _ClassVar[int]
    event_id: int
    ready: Ready
    message_posted: MessagePosted
    message_updated: MessageUpdated
    presence_changed: PresenceChanged
    channel_changed: ChannelChanged
    inbox_item_changed: InboxItemChanged
    def __init__(self, event_id: _Optional[int] = ..., ready: _Optional[_Union[Ready, _Mapping]] = ..., message_posted: _Optional[_Union[MessagePosted, _Mapping]] = ..., message_updated: _Optional[_Union[MessageUpdated, _Mapping]] = ..., presence_changed: _Optional[_Union[PresenceChanged, _Mapping]] = ..., channel_changed: _Optional[_Union[ChannelChanged, _Mapping]] = ..., inbox_item_changed: _Optional[_Union[InboxItemChanged, _Mapping]] = ...) -> None: ...

class Ready(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class MessagePosted(_message.Message):
    __slots__ = ("message",)
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    message: Message
    def __init__(self, message: _Optional[_Union[Message, _Mapping]] = ...) -> None: ...

class MessageUpdated(_message.Message):
    __slots__ = ("message",)
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    message: Message
    def __init__(self, message: _Optional[_Union[Message, _Mapping]] = ...) -> None: ...

class PresenceChanged(_message.Message):
    __slots__ = ("presence",)
    PRESENCE_FIELD_NUMBER: _ClassVar[int]
    presence: Presence
    def __init__(self, presence: _Optional[_Union[Presence, _Mapping]] = ...) -> None: ...

class ChannelChanged(_message.Message):
    __slots__ = ("channel",)
    CHANNEL_FIELD_NUMBER: _ClassVar[int]
    channel: Channel
    def __init__(self, channel: _Optional[_Union[Channel, _Mapping]] = ...) -> None: ...

class InboxItemChanged(_message.Message):
    __slots__ = ("item_id", "agent_account_id", "key", "revision", "status", "actor_account_id", "message")
    ITEM_ID_FIELD_NUMBER: _ClassVar[int]
    AGENT_ACCOUNT_ID_FIELD_NUMBER: _ClassVar[int]
    KEY_FIELD_NUMBER: _ClassVar[int]
    REVISION_FIELD_NUMBER: _ClassVar[int]
    STATUS_FIELD_NUMBER: _ClassVar[int]
    ACTOR_ACCOUNT_ID_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    item_id: str
    agent_account_id: str
    key: str
    revision: int
    status: InboxItemStatus
    actor_account_id: str
    message: Message
    def __init__(self, item_id: _Optional[str] = ..., agent_account_id: _Optional[str] = ..., key: _Optional[str] = ..., revision: _Optional[int] = ..., status: _Optional[_Union[InboxItemStatus, str]] = ..., actor_account_id: _Optional[str] = ..., message: _Optional[_Union[Message, _Mapping]] = ...) -> None: ...

class GetAskMessageRequest(_message.Message):
    __slots__ = ("ask_id",)
    ASK_ID_FIELD_NUMBER: _ClassVar[int]
    ask_id: str
    def __init__(self, ask_id: _Optional[str] = ...) -> None: ...

class GetAskMessageResponse(_message.Message):
    __slots__ = ("message",)
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    message: Message
    def __init__(self, message: _Optional[_Union[Message, _Mapping]] = ...) -> None: ...
