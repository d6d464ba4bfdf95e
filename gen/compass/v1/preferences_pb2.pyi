import datetime

from google.protobuf import timestamp_pb2 as _timestamp_pb2
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class MailPreference(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    MAIL_PREFERENCE_UNSPECIFIED: _ClassVar[MailPreference]
    MAIL_PREFERENCE_NAMED: _ClassVar[MailPreference]
    MAIL_PREFERENCE_ALL: _ClassVar[MailPreference]
    MAIL_PREFERENCE_OFF: _ClassVar[MailPreference]
MAIL_PREFERENCE_UNSPECIFIED: MailPreference
MAIL_PREFERENCE_NAMED: MailPreference
MAIL_PREFERENCE_ALL: MailPreference
MAIL_PREFERENCE_OFF: MailPreference

class NotificationPreferences(_message.Message):
    __slots__ = ("page", "push", "email", "quiet_start", "quiet_end", "time_zone", "slack_dm")
    PAGE_FIELD_NUMBER: _ClassVar[int]
    PUSH_FIELD_NUMBER: _ClassVar[int]
    EMAIL_FIELD_NUMBER: _ClassVar[int]
    QUIET_START_FIELD_NUMBER: _ClassVar[int]
    QUIET_END_FIELD_NUMBER: _ClassVar[int]
    TIME_ZONE_FIELD_NUMBER: _ClassVar[int]
    SLACK_DM_FIELD_NUMBER: _ClassVar[int]
    page: bool
    push: bool
    email: MailPreference
    quiet_start: str
    quiet_end: str
    time_zone: str
    slack_dm: bool
    def __init__(self, page: _Optional[bool] = ..., push: _Optional[bool] = ..., email: _Optional[_Union[MailPreference, str]] = ..., quiet_start: _Optional[str] = ..., quiet_end: _Optional[str] = ..., time_zone: _Optional[str] = ..., slack_dm: _Optional[bool] = ...) -> None: ...

class GetNotificationPreferencesRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class GetNotificationPreferencesResponse(_message.Message):
    __slots__ = ("preferences", "vapid_public_key", "slack_dm_available", "slack_app_connected")
    PREFERENCES_FIELD_NUMBER: _ClassVar[int]
    VAPID_PUBLIC_KEY_FIELD_NUMBER: _ClassVar[int]
    SLACK_DM_AVAILABLE_FIELD_NUMBER: _ClassVar[int]
    SLACK_APP_CONNECTED_FIELD_NUMBER: _ClassVar[int]
    preferences: NotificationPreferences
    vapid_public_key: str
    slack_dm_available: bool
    slack_app_connected: bool
    def __init__(self, preferences: _Optional[_Union[NotificationPreferences, _Mapping]] = ..., vapid_public_key: _Optional[str] = ..., slack_dm_available: _Optional[bool] = ..., slack_app_connected: _Optional[bool] = ...) -> None: ...

class SetNotificationPreferencesRequest(_message.Message):
    __slots__ = ("preferences",)
    PREFERENCES_FIELD_NUMBER: _ClassVar[int]
    preferences: NotificationPreferences
    def __init__(self, preferences: _Optional[_Union[NotificationPreferences, _Mapping]] = ...) -> None: ...

class SetNotificationPreferencesResponse(_message.Message):
    __slots__ = ("preferences",)
    PREFERENCES_FIELD_NUMBER: _ClassVar[int]
    preferences: NotificationPreferences
    def __init__(self, preferences: _Optional[_Union[NotificationPreferences, _Mapping]] = ...) -> None: ...

class PushSubscription(_message.Message):
    __slots__ = ("subscription_id", "endpoint", "created_at")
    SUBSCRIPTION_ID_FIELD_NUMBER: _ClassVar[int]
    ENDPOINT_FIELD_NUMBER: _ClassVar[int]
    CREATED_AT_FIELD_NUMBER: _ClassVar[int]
    subscription_id: str
    endpoint: str
    created_at: _timestamp_pb2.Timestamp
    def __init__(self, subscription_id: _Optional[str] = ..., endpoint: _Optional[str] = ..., created_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ...) -> None: ...

class AddPushSubscriptionRequest(_message.Message):
    __slots__ = ("endpoint", "p256dh", "auth")
    ENDPOINT_FIELD_NUMBER: _ClassVar[int]
    P256DH_FIELD_NUMBER: _ClassVar[int]
    AUTH_FIELD_NUMBER: _ClassVar[int]
    endpoint: str
    p256dh: str
    auth: str
    def __init__(self, endpoint: _Optional[str] = ..., p256dh: _Optional[str] = ..., auth: _Optional[str] = ...) -> None: ...

class AddPushSubscriptionResponse(_message.Message):
    __slots__ = ("subscription",)
    SUBSCRIPTION_FIELD_NUMBER: _ClassVar[int]
    subscription: PushSubscription
    def __init__(self, subscription: _Optional[_Union[PushSubscription, _Mapping]] = ...) -> None: ...

class RemovePushSubscriptionRequest(_message.Message):
    __slots__ = ("endpoint",)
    ENDPOINT_FIELD_NUMBER: _ClassVar[int]
    endpoint: str
    def __init__(self, endpoint: _Optional[str] = ...) -> None: ...

class RemovePushSubscriptionResponse(_message.Message):
    __slots__ = ("removed",)
    REMOVED_FIELD_NUMBER: _ClassVar[int]
    removed: bool
    def __init__(self, removed: _Optional[bool] = ...) -> None: ...

class CreateSlackLinkCodeRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class CreateSlackLinkCodeResponse(_message.Message):
    __slots__ = ("code", "expires_at")
    CODE_FIELD_NUMBER: _ClassVar[int]
    EXPIRES_AT_FIELD_NUMBER: _ClassVar[int]
    code: str
    expires_at: _timestamp_pb2.Timestamp
    def __init__(self, code: _Optional[str] = ..., expires_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ...) -> None: ...
