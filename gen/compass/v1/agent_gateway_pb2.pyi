from compass.v1 import comms_pb2 as _comms_pb2
from compass.v1 import inbox_pb2 as _inbox_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class RunnerFrame(_message.Message):
    __slots__ = ("bind", "unbind", "call", "ack")
    BIND_FIELD_NUMBER: _ClassVar[int]
    UNBIND_FIELD_NUMBER: _ClassVar[int]
    CALL_FIELD_NUMBER: _ClassVar[int]
    ACK_FIELD_NUMBER: _ClassVar[int]
    bind: BindSession
    unbind: UnbindSession
    call: RelayCommsCallRequest
    ack: DeliveryAck
    def __init__(self, bind: _Optional[_Union[BindSession, _Mapping]] = ..., unbind: _Optional[_Union[UnbindSession, _Mapping]] = ..., call: _Optional[_Union[RelayCommsCallRequest, _Mapping]] = ..., ack: _Optional[_Union[DeliveryAck, _Mapping]] = ...) -> None: ...

class HubFrame(_message.Message):
    __slots__ = ("bound", "session_error", "result", "delivery", "unbound")
    BOUND_FIELD_NUMBER: _ClassVar[int]
    SESSION_ERROR_FIELD_NUMBER: _ClassVar[int]
    RESULT_FIELD_NUMBER: _ClassVar[int]
    DELIVERY_FIELD_NUMBER: _ClassVar[int]
    UNBOUND_FIELD_NUMBER: _ClassVar[int]
    bound: SessionBound
    session_error: SessionError
    result: RelayCommsCallResult
    delivery: Delivery
    unbound: SessionUnbound
    def __init__(self, bound: _Optional[_Union[SessionBound, _Mapping]] = ..., session_error: _Optional[_Union[SessionError, _Mapping]] = ..., result: _Optional[_Union[RelayCommsCallResult, _Mapping]] = ..., delivery: _Optional[_Union[Delivery, _Mapping]] = ..., unbound: _Optional[_Union[SessionUnbound, _Mapping]] = ...) -> None: ...

class BindSession(_message.Message):
    __slots__ = ("session_id", "agent_account_id")
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    AGENT_ACCOUNT_ID_FIELD_NUMBER: _ClassVar[int]
    session_id: str
    agent_account_id: str
    def __init__(self, session_id: _Optional[str] = ..., agent_account_id: _Optional[str] = ...) -> None: ...

class UnbindSession(_message.Message):
    __slots__ = ("session_id",)
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    session_id: str
    def __init__(self, session_id: _Optional[str] = ...) -> None: ...

class SessionBound(_message.Message):
    __slots__ = ("session_id", "agent_account_id", "acked_event_id")
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    AGENT_ACCOUNT_ID_FIELD_NUMBER: _ClassVar[int]
    ACKED_EVENT_ID_FIELD_NUMBER: _ClassVar[int]
    session_id: str
    agent_account_id: str
    acked_event_id: int
    def __init__(self, session_id: _Optional[str] = ..., agent_account_id: _Optional[str] = ..., acked_event_id: _Optional[int] = ...) -> None: ...

class SessionUnbound(_message.Message):
    __slots__ = ("session_id",)
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    session_id: str
    def __init__(self, session_id: _Optional[str] = ...) -> None: ...

class SessionError(_message.Message):
    __slots__ = ("session_id", "error")
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    session_id: str
    error: CommsCallError
    def __init__(self, session_id: _Optional[str] = ..., error: _Optional[_Union[CommsCallError, _Mapping]] = ...) -> None: ...

class Delivery(_message.Message):
    __slots__ = ("session_id", "event")
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    EVENT_FIELD_NUMBER: _ClassVar[int]
    session_id: str
    event: _comms_pb2.Event
    def __init__(self, session_id: _Optional[str] = ..., event: _Optional[_Union[_comms_pb2.Event, _Mapping]] = ...) -> None: ...

class DeliveryAck(_message.Message):
    __slots__ = ("session_id", "event_id")
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    EVENT_ID_FIELD_NUMBER: _ClassVar[int]
    session_id: str
    event_id: int
    def __init__(self, session_id: _Optional[str] = ..., event_id: _Optional[int] = ...) -> None: ...

class RelayCommsCallRequest(_message.Message):
    __slots__ = ("session_id", "call_id", "call")
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    CALL_ID_FIELD_NUMBER: _ClassVar[int]
    CALL_FIELD_NUMBER: _ClassVar[int]
    session_id: str
    call_id: str
    call: CommsCallRequest
    def __init__(self, session_id: _Optional[str] = ..., call_id: _Optional[str] = ..., call: _Optional[_Union[CommsCallRequest, _Mapping]] = ...) -> None: ...

class RelayCommsCallResult(_message.Message):
    __slots__ = ("session_id", "call_id", "result")
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    CALL_ID_FIELD_NUMBER: _ClassVar[int]
    RESULT_FIELD_NUMBER: _ClassVar[int]
    session_id: str
    call_id: str
    result: CommsCallResult
    def __init__(self, session_id: _Optional[str] = ..., call_id: _Optional[str] = ..., result: _Optional[_Union[CommsCallResult, _Mapping]] = ...) -> None: ...

class CommsCallRequest(_message.Message):
    __slots__ = ("post_message", "post_ask", "list_messages", "list_channels", "get_message", "search_messages", "open_dm", "create_channel", "add_channel_member", "update_topic", "set_status", "cancel_ask", "inbox_post", "inbox_reply", "inbox_close", "get_ask", "spawn_agent", "trigger_traceparent")
    POST_MESSAGE_FIELD_NUMBER: _ClassVar[int]
    POST_ASK_FIELD_NUMBER: _ClassVar[int]
    LIST_MESSAGES_FIELD_NUMBER: _ClassVar[int]
    LIST_CHANNELS_FIELD_NUMBER: _ClassVar[int]
    GET_MESSAGE_FIELD_NUMBER: _ClassVar[int]
    SEARCH_MESSAGES_FIELD_NUMBER: _ClassVar[int]
    OPEN_DM_FIELD_NUMBER: _ClassVar[int]
    CREATE_CHANNEL_FIELD_NUMBER: _ClassVar[int]
    ADD_CHANNEL_MEMBER_FIELD_NUMBER: _ClassVar[int]
    UPDATE_TOPIC_FIELD_NUMBER: _ClassVar[int]
    SET_STATUS_FIELD_NUMBER: _ClassVar[int]
    CANCEL_ASK_FIELD_NUMBER: _ClassVar[int]
    INBOX_POST_FIELD_NUMBER: _ClassVar[int]
    INBOX_REPLY_FIELD_NUMBER: _ClassVar[int]
    INBOX_CLOSE_FIELD_NUMBER: _ClassVar[int]
    GET_ASK_FIELD_NUMBER: _ClassVar[int]
    SPAWN_AGENT_FIELD_NUMBER: _ClassVar[int]
    TRIGGER_TRACEPARENT_FIELD_NUMBER: _ClassVar[int]
    post_message: _comms_pb2.PostMessageRequest
    post_ask: PostAskRequest
    list_messages: _comms_pb2.ListMessagesRequest
    list_channels: _comms_pb2.ListChannelsRequest
    get_message: _comms_pb2.GetMessageRequest
    search_messages: _comms_pb2.SearchMessagesRequest
    open_dm: _comms_pb2.OpenDMRequest
    create_channel: _comms_pb2.CreateChannelRequest
    add_channel_member: _comms_pb2.AddChannelMemberRequest
    update_topic: _comms_pb2.UpdateTopicRequest
    set_status: SetAgentStatusRequest
    cancel_ask: CancelAskRequest
    inbox_post: InboxPostRequest
    inbox_reply: InboxReplyRequest
    inbox_close: InboxCloseRequest
    get_ask: GetAskRequest
    spawn_agent: SpawnAgentRequest
    trigger_traceparent: str
    def __init__(self, post_message: _Optional[_Union[_comms_pb2.PostMessageRequest, _Mapping]] = ..., post_ask: _Optional[_Union[PostAskRequest, _Mapping]] = ..., list_messages: _Optional[_Union[_comms_pb2.ListMessagesRequest, _Mapping]] = ..., list_channels: _Optional[_Union[_comms_pb2.ListChannelsRequest, _Mapping]] = ..., get_message: _Optional[_Union[_comms_pb2.GetMessageRequest, _Mapping]] = ..., search_messages: _Optional[_Union[_comms_pb2.SearchMessagesRequest, _Mapping]] = ..., open_dm: _Optional[_Union[_comms_pb2.OpenDMRequest, _Mapping]] = ..., create_channel: _Optional[_Union[_comms_pb2.CreateChannelRequest, _Mapping]] = ..., add_channel_member: _Optional[_Union[_comms_pb2.AddChannelMemberRequest, _Mapping]] = ..., update_topic: _Optional[_Union[_comms_pb2.UpdateTopicRequest, _Mapping]] = ..., set_status: _Optional[_Union[SetAgentStatusRequest, _Mapping]] = ..., cancel_ask: _Optional[_Union[CancelAskRequest, _Mapping]] = ..., inbox_post: _Optional[_Union[InboxPostRequest, _Mapping]] = ..., inbox_reply: _Optional[_Union[InboxReplyRequest, _Mapping]] = ..., inbox_close: _Optional[_Union[InboxCloseRequest, _Mapping]] = ..., get_ask: _Optional[_Union[GetAskRequest, _Mapping]] = ..., spawn_agent: _Optional[_Union[SpawnAgentRequest, _Mapping]] = ..., trigger_traceparent: _Optional[str] = ...) -> None: ...

class CommsCallResult(_message.Message):
    __slots__ = ("post_message", "post_ask", "list_messages", "list_channels", "get_message", "search_messages", "open_dm", "create_channel", "add_channel_member", "error", "update_topic", "set_status", "cancel_ask", "inbox_post", "inbox_reply", "inbox_close", "get_ask", "spawn_agent")
    POST_MESSAGE_FIELD_NUMBER: _ClassVar[int]
    POST_ASK_FIELD_NUMBER: _ClassVar[int]
    LIST_MESSAGES_FIELD_NUMBER: _ClassVar[int]
    LIST_CHANNELS_FIELD_NUMBER: _ClassVar[int]
    GET_MESSAGE_FIELD_NUMBER: _ClassVar[int]
    SEARCH_MESSAGES_FIELD_NUMBER: _ClassVar[int]
    OPEN_DM_FIELD_NUMBER: _ClassVar[int]
    CREATE_CHANNEL_FIELD_NUMBER: _ClassVar[int]
    ADD_CHANNEL_MEMBER_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    UPDATE_TOPIC_FIELD_NUMBER: _ClassVar[int]
    SET_STATUS_FIELD_NUMBER: _ClassVar[int]
    CANCEL_ASK_FIELD_NUMBER: _ClassVar[int]
    INBOX_POST_FIELD_NUMBER: _ClassVar[int]
    INBOX_REPLY_FIELD_NUMBER: _ClassVar[int]
    INBOX_CLOSE_FIELD_NUMBER: _ClassVar[int]
    GET_ASK_FIELD_NUMBER: _ClassVar[int]
    SPAWN_AGENT_FIELD_NUMBER: _ClassVar[int]
    post_message: _comms_pb2.PostMessageResponse
    post_ask: PostAskResponse
    list_messages: _comms_pb2.ListMessagesResponse
    list_channels: _comms_pb2.ListChannelsResponse
    get_message: _comms_pb2.GetMessageResponse
    search_messages: _comms_pb2.SearchMessagesResponse
    open_dm: _comms_pb2.OpenDMResponse
    create_channel: _comms_pb2.CreateChannelResponse
    add_channel_member: _comms_pb2.AddChannelMemberResponse
    error: CommsCallError
    update_topic: _comms_pb2.UpdateTopicResponse
    set_status: SetAgentStatusResponse
    cancel_ask: CancelAskResponse
    inbox_post: InboxPostResponse
    inbox_reply: InboxReplyResponse
    inbox_close: InboxCloseResponse
    get_ask: GetAskResponse
    spawn_agent: SpawnAgentResponse
    def __init__(self, post_message: _Optional[_Union[_comms_pb2.PostMessageResponse, _Mapping]] = ..., post_ask: _Optional[_Union[PostAskResponse, _Mapping]] = ..., list_messages: _Optional[_Union[_comms_pb2.ListMessagesResponse, _Mapping]] = ..., list_channels: _Optional[_Union[_comms_pb2.ListChannelsResponse, _Mapping]] = ..., get_message: _Optional[_Union[_comms_pb2.GetMessageResponse, _Mapping]] = ..., search_messages: _Optional[_Union[_comms_pb2.SearchMessagesResponse, _Mapping]] = ..., open_dm: _Optional[_Union[_comms_pb2.OpenDMResponse, _Mapping]] = ..., create_channel: _Optional[_Union[_comms_pb2.CreateChannelResponse, _Mapping]] = ..., add_channel_member: _Optional[_Union[_comms_pb2.AddChannelMemberResponse, _Mapping]] = ..., error: _Optional[_Union[CommsCallError, _Mapping]] = ..., update_topic: _Optional[_Union[_comms_pb2.UpdateTopicResponse, _Mapping]] = ..., set_status: _Optional[_Union[SetAgentStatusResponse, _Mapping]] = ..., cancel_ask: _Optional[_Union[CancelAskResponse, _Mapping]] = ..., inbox_post: _Optional[_Union[InboxPostResponse, _Mapping]] = ..., inbox_reply: _Optional[_Union[InboxReplyResponse, _Mapping]] = ..., inbox_close: _Optional[_Union[InboxCloseResponse, _Mapping]] = ..., get_ask: _Optional[_Union[GetAskResponse, _Mapping]] = ..., spawn_agent: _Optional[_Union[SpawnAgentResponse, _Mapping]] = ...) -> None: ...

class CommsCallError(_message.Message):
    __slots__ = ("code", "message")
    CODE_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    code: str
    message: str
    def __init__(self, code: _Optional[str] = ..., message: _Optional[str] = ...) -> None: ...

class PostAskRequest(_message.Message):
    __slots__ = ("channel_id", "text", "ask", "client_key", "allow_identical")
    CHANNEL_ID_FIELD_NUMBER: _ClassVar[int]
    TEXT_FIELD_NUMBER: _ClassVar[int]
    ASK_FIELD_NUMBER: _ClassVar[int]
    CLIENT_KEY_FIELD_NUMBER: _ClassVar[int]
    ALLOW_IDENTICAL_FIELD_NUMBER: _ClassVar[int]
    channel_id: str
    text: str
    ask: _comms_pb2.Ask
    client_key: str
    allow_identical: bool
    def __init__(self, channel_id: _Optional[str] = ..., text: _Optional[str] = ..., ask: _Optional[_Union[_comms_pb2.Ask, _Mapping]] = ..., client_key: _Optional[str] = ..., allow_identical: _Optional[bool] = ...) -> None: ...

class PostAskResponse(_message.Message):
    __slots__ = ("message", "ask_id", "outcome")
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    ASK_ID_FIELD_NUMBER: _ClassVar[int]
    OUTCOME_FIELD_NUMBER: _ClassVar[int]
    message: _comms_pb2.Message
    ask_id: str
    outcome: _comms_pb2.PostOutcome
    def __init__(self, message: _Optional[_Union[_comms_pb2.Message, _Mapping]] = ..., ask_id: _Optional[str] = ..., outcome: _Optional[_Union[_comms_pb2.PostOutcome, str]] = ...) -> None: ...

class SetAgentStatusRequest(_message.Message):
    __slots__ = ("state", "text")
    STATE_FIELD_NUMBER: _ClassVar[int]
    TEXT_FIELD_NUMBER: _ClassVar[int]
    state: _comms_pb2.PresenceState
    text: str
    def __init__(self, state: _Optional[_Union[_comms_pb2.PresenceState, str]] = ..., text: _Optional[str] = ...) -> None: ...

class SetAgentStatusResponse(_message.Message):
    __slots__ = ("presence",)
    PRESENCE_FIELD_NUMBER: _ClassVar[int]
    presence: _comms_pb2.Presence
    def __init__(self, presence: _Optional[_Union[_comms_pb2.Presence, _Mapping]] = ...) -> None: ...

class CancelAskRequest(_message.Message):
    __slots__ = ("ask_id",)
    ASK_ID_FIELD_NUMBER: _ClassVar[int]
    ask_id: str
    def __init__(self, ask_id: _Optional[str] = ...) -> None: ...

class CancelAskResponse(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class GetAskRequest(_message.Message):
    __slots__ = ("ask_id",)
    ASK_ID_FIELD_NUMBER: _ClassVar[int]
    ask_id: str
    def __init__(self, ask_id: _Optional[str] = ...) -> None: ...

class GetAskResponse(_message.Message):
    __slots__ = ("message", "ask")
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    ASK_FIELD_NUMBER: _ClassVar[int]
    message: _comms_pb2.Message
    ask: _comms_pb2.Ask
    def __init__(self, message: _Optional[_Union[_comms_pb2.Message, _Mapping]] = ..., ask: _Optional[_Union[_comms_pb2.Ask, _Mapping]] = ...) -> None: ...

class SpawnAgentRequest(_message.Message):
    __slots__ = ("handle",)
    HANDLE_FIELD_NUMBER: _ClassVar[int]
    handle: str
    def __init__(self, handle: _Optional[str] = ...) -> None: ...

class SpawnAgentResponse(_message.Message):
    __slots__ = ("agent",)
    AGENT_FIELD_NUMBER: _ClassVar[int]
    agent: _comms_pb2.Account
    def __init__(self, agent: _Optional[_Union[_comms_pb2.Account, _Mapping]] = ...) -> None: ...

class InboxPostRequest(_message.Message):
    __slots__ = ("key", "title", "body", "ask", "pictures")
    KEY_FIELD_NUMBER: _ClassVar[int]
    TITLE_FIELD_NUMBER: _ClassVar[int]
    BODY_FIELD_NUMBER: _ClassVar[int]
    ASK_FIELD_NUMBER: _ClassVar[int]
    PICTURES_FIELD_NUMBER: _ClassVar[int]
    key: str
    title: str
    body: str
    ask: _comms_pb2.Ask
    pictures: _containers.RepeatedCompositeFieldContainer[_inbox_pb2.InboxFile]
    def __init__(self, key: _Optional[str] = ..., title: _Optional[str] = ..., body: _Optional[str] = ..., ask: _Optional[_Union[_comms_pb2.Ask, _Mapping]] = ..., pictures: _Optional[_Iterable[_Union[_inbox_pb2.InboxFile, _Mapping]]] = ...) -> None: ...

class InboxPostResponse(_message.Message):
    __slots__ = ("item", "message")
    ITEM_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    item: _inbox_pb2.InboxItem
    message: _inbox_pb2.InboxMessage
    def __init__(self, item: _Optional[_Union[_inbox_pb2.InboxItem, _Mapping]] = ..., message: _Optional[_Union[_inbox_pb2.InboxMessage, _Mapping]] = ...) -> None: ...

class InboxReplyRequest(_message.Message):
    __slots__ = ("key", "text", "pictures")
    KEY_FIELD_NUMBER: _ClassVar[int]
    TEXT_FIELD_NUMBER: _ClassVar[int]
    PICTURES_FIELD_NUMBER: _ClassVar[int]
    key: str
    text: str
    pictures: _containers.RepeatedCompositeFieldContainer[_inbox_pb2.InboxFile]
    def __init__(self, key: _Optional[str] = ..., text: _Optional[str] = ..., pictures: _Optional[_Iterable[_Union[_inbox_pb2.InboxFile, _Mapping]]] = ...) -> None: ...

class InboxReplyResponse(_message.Message):
    __slots__ = ("item", "message")
    ITEM_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    item: _inbox_pb2.InboxItem
    message: _inbox_pb2.InboxMessage
    def __init__(self, item: _Optional[_Union[_inbox_pb2.InboxItem, _Mapping]] = ..., message: _Optional[_Union[_inbox_pb2.InboxMessage, _Mapping]] = ...) -> None: ...

class InboxCloseRequest(_message.Message):
    __slots__ = ("key", "reason")
    KEY_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    key: str
    reason: str
    def __init__(self, key: _Optional[str] = ..., reason: _Optional[str] = ...) -> None: ...

class InboxCloseResponse(_message.Message):
    __slots__ = ("item",)
    ITEM_FIELD_NUMBER: _ClassVar[int]
    item: _inbox_pb2.InboxItem
    def __init__(self, item: _Optional[_Union[_inbox_pb2.InboxItem, _Mapping]] = ...) -> None: ...
