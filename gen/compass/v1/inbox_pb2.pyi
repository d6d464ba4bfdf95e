import datetime

from compass.v1 import comms_pb2 as _comms_pb2
from google.protobuf import timestamp_pb2 as _timestamp_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class InboxAskStatus(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    INBOX_ASK_STATUS_UNSPECIFIED: _ClassVar[InboxAskStatus]
    INBOX_ASK_STATUS_OPEN: _ClassVar[InboxAskStatus]
    INBOX_ASK_STATUS_REPLACED: _ClassVar[InboxAskStatus]
    INBOX_ASK_STATUS_ANSWERED: _ClassVar[InboxAskStatus]
    INBOX_ASK_STATUS_WITHDRAWN: _ClassVar[InboxAskStatus]
    INBOX_ASK_STATUS_DECLINED: _ClassVar[InboxAskStatus]

class InboxAnswerOutcome(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    INBOX_ANSWER_OUTCOME_UNSPECIFIED: _ClassVar[InboxAnswerOutcome]
    INBOX_ANSWER_OUTCOME_TAKEN: _ClassVar[InboxAnswerOutcome]
    INBOX_ANSWER_OUTCOME_REPEATED: _ClassVar[InboxAnswerOutcome]
    INBOX_ANSWER_OUTCOME_NOT_OPEN: _ClassVar[InboxAnswerOutcome]
    INBOX_ANSWER_OUTCOME_REFUSED: _ClassVar[InboxAnswerOutcome]
INBOX_ASK_STATUS_UNSPECIFIED: InboxAskStatus
INBOX_ASK_STATUS_OPEN: InboxAskStatus
INBOX_ASK_STATUS_REPLACED: InboxAskStatus
INBOX_ASK_STATUS_ANSWERED: InboxAskStatus
INBOX_ASK_STATUS_WITHDRAWN: InboxAskStatus
INBOX_ASK_STATUS_DECLINED: InboxAskStatus
INBOX_ANSWER_OUTCOME_UNSPECIFIED: InboxAnswerOutcome
INBOX_ANSWER_OUTCOME_TAKEN: InboxAnswerOutcome
INBOX_ANSWER_OUTCOME_REPEATED: InboxAnswerOutcome
INBOX_ANSWER_OUTCOME_NOT_OPEN: InboxAnswerOutcome
INBOX_ANSWER_OUTCOME_REFUSED: InboxAnswerOutcome

class InboxItem(_message.Message):
    __slots__ = ("item_id", "agent_account_id", "agent_handle", "key", "title", "status", "revision", "ask_id", "close_reason", "answered_by_account_id", "closed_by_account_id", "created_at", "updated_at", "settled_at")
    ITEM_ID_FIELD_NUMBER: _ClassVar[int]
    AGENT_ACCOUNT_ID_FIELD_NUMBER: _ClassVar[int]
    AGENT_HANDLE_FIELD_NUMBER: _ClassVar[int]
    KEY_FIELD_NUMBER: _ClassVar[int]
    TITLE_FIELD_NUMBER: _ClassVar[int]
    STATUS_FIELD_NUMBER: _ClassVar[int]
    REVISION_FIELD_NUMBER: _ClassVar[int]
    ASK_ID_FIELD_NUMBER: _ClassVar[int]
    CLOSE_REASON_FIELD_NUMBER: _ClassVar[int]
    ANSWERED_BY_ACCOUNT_ID_FIELD_NUMBER: _ClassVar[int]
    CLOSED_BY_ACCOUNT_ID_FIELD_NUMBER: _ClassVar[int]
    CREATED_AT_FIELD_NUMBER: _ClassVar[int]
    UPDATED_AT_FIELD_NUMBER: _ClassVar[int]
    SETTLED_AT_FIELD_NUMBER: _ClassVar[int]
    item_id: str
    agent_account_id: str
    agent_handle: str
    key: str
    title: str
    status: _comms_pb2.InboxItemStatus
    revision: int
    ask_id: str
    close_reason: str
    answered_by_account_id: str
    closed_by_account_id: str
    created_at: _timestamp_pb2.Timestamp
    updated_at: _timestamp_pb2.Timestamp
    settled_at: _timestamp_pb2.Timestamp
    def __init__(self, item_id: _Optional[str] = ..., agent_account_id: _Optional[str] = ..., agent_handle: _Optional[str] = ..., key: _Optional[str] = ..., title: _Optional[str] = ..., status: _Optional[_Union[_comms_pb2.InboxItemStatus, str]] = ..., revision: _Optional[int] = ..., ask_id: _Optional[str] = ..., close_reason: _Optional[str] = ..., answered_by_account_id: _Optional[str] = ..., closed_by_account_id: _Optional[str] = ..., created_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., updated_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., settled_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ...) -> None: ...

class InboxAttachment(_message.Message):
    __slots__ = ("attachment_id", "name", "content_type", "size_bytes", "address")
    ATTACHMENT_ID_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    CONTENT_TYPE_FIELD_NUMBER: _ClassVar[int]
    SIZE_BYTES_FIELD_NUMBER: _ClassVar[int]
    ADDRESS_FIELD_NUMBER: _ClassVar[int]
    attachment_id: str
    name: str
    content_type: str
    size_bytes: int
    address: str
    def __init__(self, attachment_id: _Optional[str] = ..., name: _Optional[str] = ..., content_type: _Optional[str] = ..., size_bytes: _Optional[int] = ..., address: _Optional[str] = ...) -> None: ...

class InboxMessage(_message.Message):
    __slots__ = ("message", "ask_status", "withdrawn_reason", "attachments")
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    ASK_STATUS_FIELD_NUMBER: _ClassVar[int]
    WITHDRAWN_REASON_FIELD_NUMBER: _ClassVar[int]
    ATTACHMENTS_FIELD_NUMBER: _ClassVar[int]
    message: _comms_pb2.Message
    ask_status: InboxAskStatus
    withdrawn_reason: str
    attachments: _containers.RepeatedCompositeFieldContainer[InboxAttachment]
    def __init__(self, message: _Optional[_Union[_comms_pb2.Message, _Mapping]] = ..., ask_status: _Optional[_Union[InboxAskStatus, str]] = ..., withdrawn_reason: _Optional[str] = ..., attachments: _Optional[_Iterable[_Union[InboxAttachment, _Mapping]]] = ...) -> None: ...

class InboxFile(_message.Message):
    __slots__ = ("name", "data")
    NAME_FIELD_NUMBER: _ClassVar[int]
    DATA_FIELD_NUMBER: _ClassVar[int]
    name: str
    data: bytes
    def __init__(self, name: _Optional[str] = ..., data: _Optional[bytes] = ...) -> None: ...

class ListInboxItemsRequest(_message.Message):
    __slots__ = ("statuses", "agent_account_id", "page_size", "page_token")
    STATUSES_FIELD_NUMBER: _ClassVar[int]
    AGENT_ACCOUNT_ID_FIELD_NUMBER: _ClassVar[int]
    PAGE_SIZE_FIELD_NUMBER: _ClassVar[int]
    PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    statuses: _containers.RepeatedScalarFieldContainer[_comms_pb2.InboxItemStatus]
    agent_account_id: str
    page_size: int
    page_token: str
    def __init__(self, statuses: _Optional[_Iterable[_Union[_comms_pb2.InboxItemStatus, str]]] = ..., agent_account_id: _Optional[str] = ..., page_size: _Optional[int] = ..., page_token: _Optional[str] = ...) -> None: ...

class ListInboxItemsResponse(_message.Message):
    __slots__ = ("items", "next_page_token")
    ITEMS_FIELD_NUMBER: _ClassVar[int]
    NEXT_PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    items: _containers.RepeatedCompositeFieldContainer[InboxItem]
    next_page_token: str
    def __init__(self, items: _Optional[_Iterable[_Union[InboxItem, _Mapping]]] = ..., next_page_token: _Optional[str] = ...) -> None: ...

class GetInboxItemRequest(_message.Message):
    __slots__ = ("item_id", "message_limit", "page_token")
    ITEM_ID_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_LIMIT_FIELD_NUMBER: _ClassVar[int]
    PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    item_id: str
    message_limit: int
    page_token: str
    def __init__(self, item_id: _Optional[str] = ..., message_limit: _Optional[int] = ..., page_token: _Optional[str] = ...) -> None: ...

class GetInboxItemResponse(_message.Message):
    __slots__ = ("item", "thread", "total_messages", "next_page_token", "pinned_messages")
    ITEM_FIELD_NUMBER: _ClassVar[int]
    THREAD_FIELD_NUMBER: _ClassVar[int]
    TOTAL_MESSAGES_FIELD_NUMBER: _ClassVar[int]
    NEXT_PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    PINNED_MESSAGES_FIELD_NUMBER: _ClassVar[int]
    item: InboxItem
    thread: _containers.RepeatedCompositeFieldContainer[InboxMessage]
    total_messages: int
    next_page_token: str
    pinned_messages: int
    def __init__(self, item: _Optional[_Union[InboxItem, _Mapping]] = ..., thread: _Optional[_Iterable[_Union[InboxMessage, _Mapping]]] = ..., total_messages: _Optional[int] = ..., next_page_token: _Optional[str] = ..., pinned_messages: _Optional[int] = ...) -> None: ...

class AnswerInboxAskRequest(_message.Message):
    __slots__ = ("item_id", "answers", "text", "client_key", "files", "expected_revision", "ask_id")
    ITEM_ID_FIELD_NUMBER: _ClassVar[int]
    ANSWERS_FIELD_NUMBER: _ClassVar[int]
    TEXT_FIELD_NUMBER: _ClassVar[int]
    CLIENT_KEY_FIELD_NUMBER: _ClassVar[int]
    FILES_FIELD_NUMBER: _ClassVar[int]
    EXPECTED_REVISION_FIELD_NUMBER: _ClassVar[int]
    ASK_ID_FIELD_NUMBER: _ClassVar[int]
    item_id: str
    answers: _containers.RepeatedCompositeFieldContainer[_comms_pb2.AskQuestionAnswer]
    text: str
    client_key: str
    files: _containers.RepeatedCompositeFieldContainer[InboxFile]
    expected_revision: int
    ask_id: str
    def __init__(self, item_id: _Optional[str] = ..., answers: _Optional[_Iterable[_Union[_comms_pb2.AskQuestionAnswer, _Mapping]]] = ..., text: _Optional[str] = ..., client_key: _Optional[str] = ..., files: _Optional[_Iterable[_Union[InboxFile, _Mapping]]] = ..., expected_revision: _Optional[int] = ..., ask_id: _Optional[str] = ...) -> None: ...

class AnswerInboxAskResponse(_message.Message):
    __slots__ = ("outcome", "reason", "item", "answer")
    OUTCOME_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    ITEM_FIELD_NUMBER: _ClassVar[int]
    ANSWER_FIELD_NUMBER: _ClassVar[int]
    outcome: InboxAnswerOutcome
    reason: str
    item: InboxItem
    answer: InboxMessage
    def __init__(self, outcome: _Optional[_Union[InboxAnswerOutcome, str]] = ..., reason: _Optional[str] = ..., item: _Optional[_Union[InboxItem, _Mapping]] = ..., answer: _Optional[_Union[InboxMessage, _Mapping]] = ...) -> None: ...

class ReplyInboxItemRequest(_message.Message):
    __slots__ = ("item_id", "text", "files")
    ITEM_ID_FIELD_NUMBER: _ClassVar[int]
    TEXT_FIELD_NUMBER: _ClassVar[int]
    FILES_FIELD_NUMBER: _ClassVar[int]
    item_id: str
    text: str
    files: _containers.RepeatedCompositeFieldContainer[InboxFile]
    def __init__(self, item_id: _Optional[str] = ..., text: _Optional[str] = ..., files: _Optional[_Iterable[_Union[InboxFile, _Mapping]]] = ...) -> None: ...

class ReplyInboxItemResponse(_message.Message):
    __slots__ = ("item", "message")
    ITEM_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    item: InboxItem
    message: InboxMessage
    def __init__(self, item: _Optional[_Union[InboxItem, _Mapping]] = ..., message: _Optional[_Union[InboxMessage, _Mapping]] = ...) -> None: ...

class CloseInboxItemRequest(_message.Message):
    __slots__ = ("item_id",)
    ITEM_ID_FIELD_NUMBER: _ClassVar[int]
    item_id: str
    def __init__(self, item_id: _Optional[str] = ...) -> None: ...

class CloseInboxItemResponse(_message.Message):
    __slots__ = ("item",)
    ITEM_FIELD_NUMBER: _ClassVar[int]
    item: InboxItem
    def __init__(self, item: _Optional[_Union[InboxItem, _Mapping]] = ...) -> None: ...

class DeclineInboxAskRequest(_message.Message):
    __slots__ = ("item_id", "reason")
    ITEM_ID_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    item_id: str
    reason: str
    def __init__(self, item_id: _Optional[str] = ..., reason: _Optional[str] = ...) -> None: ...

class DeclineInboxAskResponse(_message.Message):
    __slots__ = ("item",)
    ITEM_FIELD_NUMBER: _ClassVar[int]
    item: InboxItem
    def __init__(self, item: _Optional[_Union[InboxItem, _Mapping]] = ...) -> None: ...

class TakeBackInboxAnswerRequest(_message.Message):
    __slots__ = ("item_id",)
    ITEM_ID_FIELD_NUMBER: _ClassVar[int]
    item_id: str
    def __init__(self, item_id: _Optional[str] = ...) -> None: ...

class TakeBackInboxAnswerResponse(_message.Message):
    __slots__ = ("item",)
    ITEM_FIELD_NUMBER: _ClassVar[int]
    item: InboxItem
    def __init__(self, item: _Optional[_Union[InboxItem, _Mapping]] = ...) -> None: ...

class ReopenInboxItemRequest(_message.Message):
    __slots__ = ("item_id",)
    ITEM_ID_FIELD_NUMBER: _ClassVar[int]
    item_id: str
    def __init__(self, item_id: _Optional[str] = ...) -> None: ...

class ReopenInboxItemResponse(_message.Message):
    __slots__ = ("item",)
    ITEM_FIELD_NUMBER: _ClassVar[int]
    item: InboxItem
    def __init__(self, item: _Optional[_Union[InboxItem, _Mapping]] = ...) -> None: ...

class GetInboxAttachmentRequest(_message.Message):
    __slots__ = ("item_id", "attachment_id")
    ITEM_ID_FIELD_NUMBER: _ClassVar[int]
    ATTACHMENT_ID_FIELD_NUMBER: _ClassVar[int]
    item_id: str
    attachment_id: str
    def __init__(self, item_id: _Optional[str] = ..., attachment_id: _Optional[str] = ...) -> None: ...

class GetInboxAttachmentResponse(_message.Message):
    __slots__ = ("attachment", "data")
    ATTACHMENT_FIELD_NUMBER: _ClassVar[int]
    DATA_FIELD_NUMBER: _ClassVar[int]
    attachment: InboxAttachment
    data: bytes
    def __init__(self, attachment: _Optional[_Union[InboxAttachment, _Mapping]] = ..., data: _Optional[bytes] = ...) -> None: ...
