import datetime

from compass.v1 import comms_pb2 as _comms_pb2
from google.protobuf import duration_pb2 as _duration_pb2
from google.protobuf import timestamp_pb2 as _timestamp_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class PrincipalKind(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    PRINCIPAL_KIND_UNSPECIFIED: _ClassVar[PrincipalKind]
    PRINCIPAL_KIND_HUMAN: _ClassVar[PrincipalKind]
    PRINCIPAL_KIND_AGENT: _ClassVar[PrincipalKind]
    PRINCIPAL_KIND_RUNNER: _ClassVar[PrincipalKind]

class WorkspaceRole(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    WORKSPACE_ROLE_UNSPECIFIED: _ClassVar[WorkspaceRole]
    WORKSPACE_ROLE_MEMBER: _ClassVar[WorkspaceRole]
    WORKSPACE_ROLE_ADMIN: _ClassVar[WorkspaceRole]

class WebhookKind(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    WEBHOOK_KIND_UNSPECIFIED: _ClassVar[WebhookKind]
    WEBHOOK_KIND_STANDARD: _ClassVar[WebhookKind]
    WEBHOOK_KIND_SLACK: _ClassVar[WebhookKind]
    WEBHOOK_KIND_EMAIL: _ClassVar[WebhookKind]
    WEBHOOK_KIND_SLACK_APP: _ClassVar[WebhookKind]
    WEBHOOK_KIND_PUSH: _ClassVar[WebhookKind]

class WebhookDeliveryState(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    WEBHOOK_DELIVERY_STATE_UNSPECIFIED: _ClassVar[WebhookDeliveryState]
    WEBHOOK_DELIVERY_STATE_PENDING: _ClassVar[WebhookDeliveryState]
    WEBHOOK_DELIVERY_STATE_DELIVERED: _ClassVar[WebhookDeliveryState]
    WEBHOOK_DELIVERY_STATE_FAILED: _ClassVar[WebhookDeliveryState]
PRINCIPAL_KIND_UNSPECIFIED: PrincipalKind
PRINCIPAL_KIND_HUMAN: PrincipalKind
PRINCIPAL_KIND_AGENT: PrincipalKind
PRINCIPAL_KIND_RUNNER: PrincipalKind
WORKSPACE_ROLE_UNSPECIFIED: WorkspaceRole
WORKSPACE_ROLE_MEMBER: WorkspaceRole
WORKSPACE_ROLE_ADMIN: WorkspaceRole
WEBHOOK_KIND_UNSPECIFIED: WebhookKind
WEBHOOK_KIND_STANDARD: WebhookKind
WEBHOOK_KIND_SLACK: WebhookKind
WEBHOOK_KIND_EMAIL: WebhookKind
WEBHOOK_KIND_SLACK_APP: WebhookKind
WEBHOOK_KIND_PUSH: WebhookKind
WEBHOOK_DELIVERY_STATE_UNSPECIFIED: WebhookDeliveryState
WEBHOOK_DELIVERY_STATE_PENDING: WebhookDeliveryState
WEBHOOK_DELIVERY_STATE_DELIVERED: WebhookDeliveryState
WEBHOOK_DELIVERY_STATE_FAILED: WebhookDeliveryState

class AccountInfo(_message.Message):
    __slots__ = ("account_id", "handle", "kind", "role", "owner_account_id", "created_at", "parent_account_id")
    ACCOUNT_ID_FIELD_NUMBER: _ClassVar[int]
    HANDLE_FIELD_NUMBER: _ClassVar[int]
    KIND_FIELD_NUMBER: _ClassVar[int]
    ROLE_FIELD_NUMBER: _ClassVar[int]
    OWNER_ACCOUNT_ID_FIELD_NUMBER: _ClassVar[int]
    CREATED_AT_FIELD_NUMBER: _ClassVar[int]
    PARENT_ACCOUNT_ID_FIELD_NUMBER: _ClassVar[int]
    account_id: str
    handle: str
    kind: PrincipalKind
    role: WorkspaceRole
    owner_account_id: str
    created_at: _timestamp_pb2.Timestamp
    parent_account_id: str
    def __init__(self, account_id: _Optional[str] = ..., handle: _Optional[str] = ..., kind: _Optional[_Union[PrincipalKind, str]] = ..., role: _Optional[_Union[WorkspaceRole, str]] = ..., owner_account_id: _Optional[str] = ..., created_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., parent_account_id: _Optional[str] = ...) -> None: ...

class RunnerInfo(_message.Message):
    __slots__ = ("runner_id", "name", "agent_account_ids", "created_at")
    RUNNER_ID_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    AGENT_ACCOUNT_IDS_FIELD_NUMBER: _ClassVar[int]
    CREATED_AT_FIELD_NUMBER: _ClassVar[int]
    runner_id: str
    name: str
    agent_account_ids: _containers.RepeatedScalarFieldContainer[str]
    created_at: _timestamp_pb2.Timestamp
    def __init__(self, runner_id: _Optional[str] = ..., name: _Optional[str] = ..., agent_account_ids: _Optional[_Iterable[str]] = ..., created_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ...) -> None: ...

class TokenInfo(_message.Message):
    __slots__ = ("token_id", "kind", "account_id", "runner_id", "label", "created_at", "expires_at", "last_used_at", "revoked_at", "replaced_by_token_id", "active")
    TOKEN_ID_FIELD_NUMBER: _ClassVar[int]
    KIND_FIELD_NUMBER: _ClassVar[int]
    ACCOUNT_ID_FIELD_NUMBER: _ClassVar[int]
    RUNNER_ID_FIELD_NUMBER: _ClassVar[int]
    LABEL_FIELD_NUMBER: _ClassVar[int]
    CREATED_AT_FIELD_NUMBER: _ClassVar[int]
    EXPIRES_AT_FIELD_NUMBER: _ClassVar[int]
    LAST_USED_AT_FIELD_NUMBER: _ClassVar[int]
    REVOKED_AT_FIELD_NUMBER: _ClassVar[int]
    REPLACED_BY_TOKEN_ID_FIELD_NUMBER: _ClassVar[int]
    ACTIVE_FIELD_NUMBER: _ClassVar[int]
    token_id: str
    kind: PrincipalKind
    account_id: str
    runner_id: str
    label: str
    created_at: _timestamp_pb2.Timestamp
    expires_at: _timestamp_pb2.Timestamp
    last_used_at: _timestamp_pb2.Timestamp
    revoked_at: _timestamp_pb2.Timestamp
    replaced_by_token_id: str
    active: bool
    def __init__(self, token_id: _Optional[str] = ..., kind: _Optional[_Union[PrincipalKind, str]] = ..., account_id: _Optional[str] = ..., runner_id: _Optional[str] = ..., label: _Optional[str] = ..., created_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., expires_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., last_used_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., revoked_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., replaced_by_token_id: _Optional[str] = ..., active: _Optional[bool] = ...) -> None: ...

class ListAccountsRequest(_message.Message):
    __slots__ = ("page_size", "page_token")
    PAGE_SIZE_FIELD_NUMBER: _ClassVar[int]
    PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    page_size: int
    page_token: str
    def __init__(self, page_size: _Optional[int] = ..., page_token: _Optional[str] = ...) -> None: ...

class ListAccountsResponse(_message.Message):
    __slots__ = ("accounts", "next_page_token")
    ACCOUNTS_FIELD_NUMBER: _ClassVar[int]
    NEXT_PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    accounts: _containers.RepeatedCompositeFieldContainer[AccountInfo]
    next_page_token: str
    def __init__(self, accounts: _Optional[_Iterable[_Union[AccountInfo, _Mapping]]] = ..., next_page_token: _Optional[str] = ...) -> None: ...

class CreateAccountRequest(_message.Message):
    __slots__ = ("handle", "kind", "owner_account_id", "role", "token_label", "token_expires_in", "parent_account_id")
    HANDLE_FIELD_NUMBER: _ClassVar[int]
    KIND_FIELD_NUMBER: _ClassVar[int]
    OWNER_ACCOUNT_ID_FIELD_NUMBER: _ClassVar[int]
    ROLE_FIELD_NUMBER: _ClassVar[int]
    TOKEN_LABEL_FIELD_NUMBER: _ClassVar[int]
    TOKEN_EXPIRES_IN_FIELD_NUMBER: _ClassVar[int]
    PARENT_ACCOUNT_ID_FIELD_NUMBER: _ClassVar[int]
    handle: str
    kind: PrincipalKind
    owner_account_id: str
    role: WorkspaceRole
    token_label: str
    token_expires_in: _duration_pb2.Duration
    parent_account_id: str
    def __init__(self, handle: _Optional[str] = ..., kind: _Optional[_Union[PrincipalKind, str]] = ..., owner_account_id: _Optional[str] = ..., role: _Optional[_Union[WorkspaceRole, str]] = ..., token_label: _Optional[str] = ..., token_expires_in: _Optional[_Union[datetime.timedelta, _duration_pb2.Duration, _Mapping]] = ..., parent_account_id: _Optional[str] = ...) -> None: ...

class CreateAccountResponse(_message.Message):
    __slots__ = ("account", "token", "token_info")
    ACCOUNT_FIELD_NUMBER: _ClassVar[int]
    TOKEN_FIELD_NUMBER: _ClassVar[int]
    TOKEN_INFO_FIELD_NUMBER: _ClassVar[int]
    account: AccountInfo
    token: str
    token_info: TokenInfo
    def __init__(self, account: _Optional[_Union[AccountInfo, _Mapping]] = ..., token: _Optional[str] = ..., token_info: _Optional[_Union[TokenInfo, _Mapping]] = ...) -> None: ...

class SetAccountRoleRequest(_message.Message):
    __slots__ = ("account_id", "role")
    ACCOUNT_ID_FIELD_NUMBER: _ClassVar[int]
    ROLE_FIELD_NUMBER: _ClassVar[int]
    account_id: str
    role: WorkspaceRole
    def __init__(self, account_id: _Optional[str] = ..., role: _Optional[_Union[WorkspaceRole, str]] = ...) -> None: ...

class SetAccountRoleResponse(_message.Message):
    __slots__ = ("account",)
    ACCOUNT_FIELD_NUMBER: _ClassVar[int]
    account: AccountInfo
    def __init__(self, account: _Optional[_Union[AccountInfo, _Mapping]] = ...) -> None: ...

class ListRunnersRequest(_message.Message):
    __slots__ = ("page_size", "page_token")
    PAGE_SIZE_FIELD_NUMBER: _ClassVar[int]
    PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    page_size: int
    page_token: str
    def __init__(self, page_size: _Optional[int] = ..., page_token: _Optional[str] = ...) -> None: ...

class ListRunnersResponse(_message.Message):
    __slots__ = ("runners", "next_page_token")
    RUNNERS_FIELD_NUMBER: _ClassVar[int]
    NEXT_PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    runners: _containers.RepeatedCompositeFieldContainer[RunnerInfo]
    next_page_token: str
    def __init__(self, runners: _Optional[_Iterable[_Union[RunnerInfo, _Mapping]]] = ..., next_page_token: _Optional[str] = ...) -> None: ...

class CreateRunnerRequest(_message.Message):
    __slots__ = ("name", "token_label", "token_expires_in")
    NAME_FIELD_NUMBER: _ClassVar[int]
    TOKEN_LABEL_FIELD_NUMBER: _ClassVar[int]
    TOKEN_EXPIRES_IN_FIELD_NUMBER: _ClassVar[int]
    name: str
    token_label: str
    token_expires_in: _duration_pb2.Duration
    def __init__(self, name: _Optional[str] = ..., token_label: _Optional[str] = ..., token_expires_in: _Optional[_Union[datetime.timedelta, _duration_pb2.Duration, _Mapping]] = ...) -> None: ...

class CreateRunnerResponse(_message.Message):
    __slots__ = ("runner", "token", "token_info")
    RUNNER_FIELD_NUMBER: _ClassVar[int]
    TOKEN_FIELD_NUMBER: _ClassVar[int]
    TOKEN_INFO_FIELD_NUMBER: _ClassVar[int]
    runner: RunnerInfo
    token: str
    token_info: TokenInfo
    def __init__(self, runner: _Optional[_Union[RunnerInfo, _Mapping]] = ..., token: _Optional[str] = ..., token_info: _Optional[_Union[TokenInfo, _Mapping]] = ...) -> None: ...

class AssignAgentRequest(_message.Message):
    __slots__ = ("runner_id", "agent_account_id")
    RUNNER_ID_FIELD_NUMBER: _ClassVar[int]
    AGENT_ACCOUNT_ID_FIELD_NUMBER: _ClassVar[int]
    runner_id: str
    agent_account_id: str
    def __init__(self, runner_id: _Optional[str] = ..., agent_account_id: _Optional[str] = ...) -> None: ...

class AssignAgentResponse(_message.Message):
    __slots__ = ("runner",)
    RUNNER_FIELD_NUMBER: _ClassVar[int]
    runner: RunnerInfo
    def __init__(self, runner: _Optional[_Union[RunnerInfo, _Mapping]] = ...) -> None: ...

class UnassignAgentRequest(_message.Message):
    __slots__ = ("runner_id", "agent_account_id")
    RUNNER_ID_FIELD_NUMBER: _ClassVar[int]
    AGENT_ACCOUNT_ID_FIELD_NUMBER: _ClassVar[int]
    runner_id: str
    agent_account_id: str
    def __init__(self, runner_id: _Optional[str] = ..., agent_account_id: _Optional[str] = ...) -> None: ...

class UnassignAgentResponse(_message.Message):
    __slots__ = ("runner", "sessions_unbound")
    RUNNER_FIELD_NUMBER: _ClassVar[int]
    SESSIONS_UNBOUND_FIELD_NUMBER: _ClassVar[int]
    runner: RunnerInfo
    sessions_unbound: int
    def __init__(self, runner: _Optional[_Union[RunnerInfo, _Mapping]] = ..., sessions_unbound: _Optional[int] = ...) -> None: ...

class ReparentAgentRequest(_message.Message):
    __slots__ = ("agent_account_id", "parent_account_id")
    AGENT_ACCOUNT_ID_FIELD_NUMBER: _ClassVar[int]
    PARENT_ACCOUNT_ID_FIELD_NUMBER: _ClassVar[int]
    agent_account_id: str
    parent_account_id: str
    def __init__(self, agent_account_id: _Optional[str] = ..., parent_account_id: _Optional[str] = ...) -> None: ...

class ReparentAgentResponse(_message.Message):
    __slots__ = ("account",)
    ACCOUNT_FIELD_NUMBER: _ClassVar[int]
    account: AccountInfo
    def __init__(self, account: _Optional[_Union[AccountInfo, _Mapping]] = ...) -> None: ...

class ListTokensRequest(_message.Message):
    __slots__ = ("account_id", "runner_id", "include_inactive", "page_size", "page_token")
    ACCOUNT_ID_FIELD_NUMBER: _ClassVar[int]
    RUNNER_ID_FIELD_NUMBER: _ClassVar[int]
    INCLUDE_INACTIVE_FIELD_NUMBER: _ClassVar[int]
    PAGE_SIZE_FIELD_NUMBER: _ClassVar[int]
    PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    account_id: str
    runner_id: str
    include_inactive: bool
    page_size: int
    page_token: str
    def __init__(self, account_id: _Optional[str] = ..., runner_id: _Optional[str] = ..., include_inactive: _Optional[bool] = ..., page_size: _Optional[int] = ..., page_token: _Optional[str] = ...) -> None: ...

class ListTokensResponse(_message.Message):
    __slots__ = ("tokens", "next_page_token")
    TOKENS_FIELD_NUMBER: _ClassVar[int]
    NEXT_PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    tokens: _containers.RepeatedCompositeFieldContainer[TokenInfo]
    next_page_token: str
    def __init__(self, tokens: _Optional[_Iterable[_Union[TokenInfo, _Mapping]]] = ..., next_page_token: _Optional[str] = ...) -> None: ...

class CreateTokenRequest(_message.Message):
    __slots__ = ("account_id", "runner_id", "label", "expires_in")
    ACCOUNT_ID_FIELD_NUMBER: _ClassVar[int]
    RUNNER_ID_FIELD_NUMBER: _ClassVar[int]
    LABEL_FIELD_NUMBER: _ClassVar[int]
    EXPIRES_IN_FIELD_NUMBER: _ClassVar[int]
    account_id: str
    runner_id: str
    label: str
    expires_in: _duration_pb2.Duration
    def __init__(self, account_id: _Optional[str] = ..., runner_id: _Optional[str] = ..., label: _Optional[str] = ..., expires_in: _Optional[_Union[datetime.timedelta, _duration_pb2.Duration, _Mapping]] = ...) -> None: ...

class CreateTokenResponse(_message.Message):
    __slots__ = ("token", "token_info")
    TOKEN_FIELD_NUMBER: _ClassVar[int]
    TOKEN_INFO_FIELD_NUMBER: _ClassVar[int]
    token: str
    token_info: TokenInfo
    def __init__(self, token: _Optional[str] = ..., token_info: _Optional[_Union[TokenInfo, _Mapping]] = ...) -> None: ...

class CreateHookTokenRequest(_message.Message):
    __slots__ = ("agent_account_id", "channel_id", "policy", "label", "expires_in")
    AGENT_ACCOUNT_ID_FIELD_NUMBER: _ClassVar[int]
    CHANNEL_ID_FIELD_NUMBER: _ClassVar[int]
    POLICY_FIELD_NUMBER: _ClassVar[int]
    LABEL_FIELD_NUMBER: _ClassVar[int]
    EXPIRES_IN_FIELD_NUMBER: _ClassVar[int]
    agent_account_id: str
    channel_id: str
    policy: str
    label: str
    expires_in: _duration_pb2.Duration
    def __init__(self, agent_account_id: _Optional[str] = ..., channel_id: _Optional[str] = ..., policy: _Optional[str] = ..., label: _Optional[str] = ..., expires_in: _Optional[_Union[datetime.timedelta, _duration_pb2.Duration, _Mapping]] = ...) -> None: ...

class CreateHookTokenResponse(_message.Message):
    __slots__ = ("token", "token_info", "rules")
    TOKEN_FIELD_NUMBER: _ClassVar[int]
    TOKEN_INFO_FIELD_NUMBER: _ClassVar[int]
    RULES_FIELD_NUMBER: _ClassVar[int]
    token: str
    token_info: TokenInfo
    rules: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, token: _Optional[str] = ..., token_info: _Optional[_Union[TokenInfo, _Mapping]] = ..., rules: _Optional[_Iterable[str]] = ...) -> None: ...

class RevokeTokenRequest(_message.Message):
    __slots__ = ("token_id",)
    TOKEN_ID_FIELD_NUMBER: _ClassVar[int]
    token_id: str
    def __init__(self, token_id: _Optional[str] = ...) -> None: ...

class RevokeTokenResponse(_message.Message):
    __slots__ = ("token_info",)
    TOKEN_INFO_FIELD_NUMBER: _ClassVar[int]
    token_info: TokenInfo
    def __init__(self, token_info: _Optional[_Union[TokenInfo, _Mapping]] = ...) -> None: ...

class RotateTokenRequest(_message.Message):
    __slots__ = ("token_id", "grace", "expires_in")
    TOKEN_ID_FIELD_NUMBER: _ClassVar[int]
    GRACE_FIELD_NUMBER: _ClassVar[int]
    EXPIRES_IN_FIELD_NUMBER: _ClassVar[int]
    token_id: str
    grace: _duration_pb2.Duration
    expires_in: _duration_pb2.Duration
    def __init__(self, token_id: _Optional[str] = ..., grace: _Optional[_Union[datetime.timedelta, _duration_pb2.Duration, _Mapping]] = ..., expires_in: _Optional[_Union[datetime.timedelta, _duration_pb2.Duration, _Mapping]] = ...) -> None: ...

class RotateTokenResponse(_message.Message):
    __slots__ = ("token", "token_info", "old_token_info")
    TOKEN_FIELD_NUMBER: _ClassVar[int]
    TOKEN_INFO_FIELD_NUMBER: _ClassVar[int]
    OLD_TOKEN_INFO_FIELD_NUMBER: _ClassVar[int]
    token: str
    token_info: TokenInfo
    old_token_info: TokenInfo
    def __init__(self, token: _Optional[str] = ..., token_info: _Optional[_Union[TokenInfo, _Mapping]] = ..., old_token_info: _Optional[_Union[TokenInfo, _Mapping]] = ...) -> None: ...

class WhoAmIRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class WhoAmIResponse(_message.Message):
    __slots__ = ("workspace_id", "workspace_name", "account", "runner", "token_info")
    WORKSPACE_ID_FIELD_NUMBER: _ClassVar[int]
    WORKSPACE_NAME_FIELD_NUMBER: _ClassVar[int]
    ACCOUNT_FIELD_NUMBER: _ClassVar[int]
    RUNNER_FIELD_NUMBER: _ClassVar[int]
    TOKEN_INFO_FIELD_NUMBER: _ClassVar[int]
    workspace_id: str
    workspace_name: str
    account: AccountInfo
    runner: RunnerInfo
    token_info: TokenInfo
    def __init__(self, workspace_id: _Optional[str] = ..., workspace_name: _Optional[str] = ..., account: _Optional[_Union[AccountInfo, _Mapping]] = ..., runner: _Optional[_Union[RunnerInfo, _Mapping]] = ..., token_info: _Optional[_Union[TokenInfo, _Mapping]] = ...) -> None: ...

class WebhookInfo(_message.Message):
    __slots__ = ("webhook_id", "kind", "url", "event_types", "enabled", "disabled_reason", "disabled_at", "created_at", "previous_secret_until", "pending_deliveries", "failed_deliveries")
    WEBHOOK_ID_FIELD_NUMBER: _ClassVar[int]
    KIND_FIELD_NUMBER: _ClassVar[int]
    URL_FIELD_NUMBER: _ClassVar[int]
    EVENT_TYPES_FIELD_NUMBER: _ClassVar[int]
    ENABLED_FIELD_NUMBER: _ClassVar[int]
    DISABLED_REASON_FIELD_NUMBER: _ClassVar[int]
    DISABLED_AT_FIELD_NUMBER: _ClassVar[int]
    CREATED_AT_FIELD_NUMBER: _ClassVar[int]
    PREVIOUS_SECRET_UNTIL_FIELD_NUMBER: _ClassVar[int]
    PENDING_DELIVERIES_FIELD_NUMBER: _ClassVar[int]
    FAILED_DELIVERIES_FIELD_NUMBER: _ClassVar[int]
    webhook_id: str
    kind: WebhookKind
    url: str
    event_types: _containers.RepeatedScalarFieldContainer[str]
    enabled: bool
    disabled_reason: str
    disabled_at: _timestamp_pb2.Timestamp
    created_at: _timestamp_pb2.Timestamp
    previous_secret_until: _timestamp_pb2.Timestamp
    pending_deliveries: int
    failed_deliveries: int
    def __init__(self, webhook_id: _Optional[str] = ..., kind: _Optional[_Union[WebhookKind, str]] = ..., url: _Optional[str] = ..., event_types: _Optional[_Iterable[str]] = ..., enabled: _Optional[bool] = ..., disabled_reason: _Optional[str] = ..., disabled_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., created_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., previous_secret_until: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., pending_deliveries: _Optional[int] = ..., failed_deliveries: _Optional[int] = ...) -> None: ...

class WebhookDelivery(_message.Message):
    __slots__ = ("delivery_id", "webhook_id", "event_type", "event_id", "subject", "state", "attempts", "next_attempt_at", "created_at", "finished_at", "last_status_code", "last_error")
    DELIVERY_ID_FIELD_NUMBER: _ClassVar[int]
    WEBHOOK_ID_FIELD_NUMBER: _ClassVar[int]
    EVENT_TYPE_FIELD_NUMBER: _ClassVar[int]
    EVENT_ID_FIELD_NUMBER: _ClassVar[int]
    SUBJECT_FIELD_NUMBER: _ClassVar[int]
    STATE_FIELD_NUMBER: _ClassVar[int]
    ATTEMPTS_FIELD_NUMBER: _ClassVar[int]
    NEXT_ATTEMPT_AT_FIELD_NUMBER: _ClassVar[int]
    CREATED_AT_FIELD_NUMBER: _ClassVar[int]
    FINISHED_AT_FIELD_NUMBER: _ClassVar[int]
    LAST_STATUS_CODE_FIELD_NUMBER: _ClassVar[int]
    LAST_ERROR_FIELD_NUMBER: _ClassVar[int]
    delivery_id: str
    webhook_id: str
    event_type: str
    event_id: int
    subject: str
    state: WebhookDeliveryState
    attempts: int
    next_attempt_at: _timestamp_pb2.Timestamp
    created_at: _timestamp_pb2.Timestamp
    finished_at: _timestamp_pb2.Timestamp
    last_status_code: int
    last_error: str
    def __init__(self, delivery_id: _Optional[str] = ..., webhook_id: _Optional[str] = ..., event_type: _Optional[str] = ..., event_id: _Optional[int] = ..., subject: _Optional[str] = ..., state: _Optional[_Union[WebhookDeliveryState, str]] = ..., attempts: _Optional[int] = ..., next_attempt_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., created_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., finished_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., last_status_code: _Optional[int] = ..., last_error: _Optional[str] = ...) -> None: ...

class WebhookAttempt(_message.Message):
    __slots__ = ("attempt", "server_id", "started_at", "finished_at", "status_code", "latency", "error", "response")
    ATTEMPT_FIELD_NUMBER: _ClassVar[int]
    SERVER_ID_FIELD_NUMBER: _ClassVar[int]
    STARTED_AT_FIELD_NUMBER: _ClassVar[int]
    FINISHED_AT_FIELD_NUMBER: _ClassVar[int]
    STATUS_CODE_FIELD_NUMBER: _ClassVar[int]
    LATENCY_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    RESPONSE_FIELD_NUMBER: _ClassVar[int]
    attempt: int
    server_id: str
    started_at: _timestamp_pb2.Timestamp
    finished_at: _timestamp_pb2.Timestamp
    status_code: int
    latency: _duration_pb2.Duration
    error: str
    response: str
    def __init__(self, attempt: _Optional[int] = ..., server_id: _Optional[str] = ..., started_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., finished_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., status_code: _Optional[int] = ..., latency: _Optional[_Union[datetime.timedelta, _duration_pb2.Duration, _Mapping]] = ..., error: _Optional[str] = ..., response: _Optional[str] = ...) -> None: ...

class CreateWebhookRequest(_message.Message):
    __slots__ = ("url", "kind", "event_types")
    URL_FIELD_NUMBER: _ClassVar[int]
    KIND_FIELD_NUMBER: _ClassVar[int]
    EVENT_TYPES_FIELD_NUMBER: _ClassVar[int]
    url: str
    kind: WebhookKind
    event_types: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, url: _Optional[str] = ..., kind: _Optional[_Union[WebhookKind, str]] = ..., event_types: _Optional[_Iterable[str]] = ...) -> None: ...

class CreateWebhookResponse(_message.Message):
    __slots__ = ("webhook", "secret")
    WEBHOOK_FIELD_NUMBER: _ClassVar[int]
    SECRET_FIELD_NUMBER: _ClassVar[int]
    webhook: WebhookInfo
    secret: str
    def __init__(self, webhook: _Optional[_Union[WebhookInfo, _Mapping]] = ..., secret: _Optional[str] = ...) -> None: ...

class ListWebhooksRequest(_message.Message):
    __slots__ = ("page_size", "page_token")
    PAGE_SIZE_FIELD_NUMBER: _ClassVar[int]
    PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    page_size: int
    page_token: str
    def __init__(self, page_size: _Optional[int] = ..., page_token: _Optional[str] = ...) -> None: ...

class ListWebhooksResponse(_message.Message):
    __slots__ = ("webhooks", "next_page_token")
    WEBHOOKS_FIELD_NUMBER: _ClassVar[int]
    NEXT_PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    webhooks: _containers.RepeatedCompositeFieldContainer[WebhookInfo]
    next_page_token: str
    def __init__(self, webhooks: _Optional[_Iterable[_Union[WebhookInfo, _Mapping]]] = ..., next_page_token: _Optional[str] = ...) -> None: ...

class DisableWebhookRequest(_message.Message):
    __slots__ = ("webhook_id",)
    WEBHOOK_ID_FIELD_NUMBER: _ClassVar[int]
    webhook_id: str
    def __init__(self, webhook_id: _Optional[str] = ...) -> None: ...

class DisableWebhookResponse(_message.Message):
    __slots__ = ("webhook",)
    WEBHOOK_FIELD_NUMBER: _ClassVar[int]
    webhook: WebhookInfo
    def __init__(self, webhook: _Optional[_Union[WebhookInfo, _Mapping]] = ...) -> None: ...

class EnableWebhookRequest(_message.Message):
    __slots__ = ("webhook_id",)
    WEBHOOK_ID_FIELD_NUMBER: _ClassVar[int]
    webhook_id: str
    def __init__(self, webhook_id: _Optional[str] = ...) -> None: ...

class EnableWebhookResponse(_message.Message):
    __slots__ = ("webhook",)
    WEBHOOK_FIELD_NUMBER: _ClassVar[int]
    webhook: WebhookInfo
    def __init__(self, webhook: _Optional[_Union[WebhookInfo, _Mapping]] = ...) -> None: ...

class DeleteWebhookRequest(_message.Message):
    __slots__ = ("webhook_id",)
    WEBHOOK_ID_FIELD_NUMBER: _ClassVar[int]
    webhook_id: str
    def __init__(self, webhook_id: _Optional[str] = ...) -> None: ...

class DeleteWebhookResponse(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class RotateWebhookSecretRequest(_message.Message):
    __slots__ = ("webhook_id", "grace")
    WEBHOOK_ID_FIELD_NUMBER: _ClassVar[int]
    GRACE_FIELD_NUMBER: _ClassVar[int]
    webhook_id: str
    grace: _duration_pb2.Duration
    def __init__(self, webhook_id: _Optional[str] = ..., grace: _Optional[_Union[datetime.timedelta, _duration_pb2.Duration, _Mapping]] = ...) -> None: ...

class RotateWebhookSecretResponse(_message.Message):
    __slots__ = ("webhook", "secret")
    WEBHOOK_FIELD_NUMBER: _ClassVar[int]
    SECRET_FIELD_NUMBER: _ClassVar[int]
    webhook: WebhookInfo
    secret: str
    def __init__(self, webhook: _Optional[_Union[WebhookInfo, _Mapping]] = ..., secret: _Optional[str] = ...) -> None: ...

class ListWebhookDeliveriesRequest(_message.Message):
    __slots__ = ("webhook_id", "states", "page_size", "page_token")
    WEBHOOK_ID_FIELD_NUMBER: _ClassVar[int]
    STATES_FIELD_NUMBER: _ClassVar[int]
    PAGE_SIZE_FIELD_NUMBER: _ClassVar[int]
    PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    webhook_id: str
    states: _containers.RepeatedScalarFieldContainer[WebhookDeliveryState]
    page_size: int
    page_token: str
    def __init__(self, webhook_id: _Optional[str] = ..., states: _Optional[_Iterable[_Union[WebhookDeliveryState, str]]] = ..., page_size: _Optional[int] = ..., page_token: _Optional[str] = ...) -> None: ...

class ListWebhookDeliveriesResponse(_message.Message):
    __slots__ = ("deliveries", "next_page_token")
    DELIVERIES_FIELD_NUMBER: _ClassVar[int]
    NEXT_PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    deliveries: _containers.RepeatedCompositeFieldContainer[WebhookDelivery]
    next_page_token: str
    def __init__(self, deliveries: _Optional[_Iterable[_Union[WebhookDelivery, _Mapping]]] = ..., next_page_token: _Optional[str] = ...) -> None: ...

class GetWebhookDeliveryRequest(_message.Message):
    __slots__ = ("delivery_id",)
    DELIVERY_ID_FIELD_NUMBER: _ClassVar[int]
    delivery_id: str
    def __init__(self, delivery_id: _Optional[str] = ...) -> None: ...

class GetWebhookDeliveryResponse(_message.Message):
    __slots__ = ("delivery", "attempts", "body")
    DELIVERY_FIELD_NUMBER: _ClassVar[int]
    ATTEMPTS_FIELD_NUMBER: _ClassVar[int]
    BODY_FIELD_NUMBER: _ClassVar[int]
    delivery: WebhookDelivery
    attempts: _containers.RepeatedCompositeFieldContainer[WebhookAttempt]
    body: str
    def __init__(self, delivery: _Optional[_Union[WebhookDelivery, _Mapping]] = ..., attempts: _Optional[_Iterable[_Union[WebhookAttempt, _Mapping]]] = ..., body: _Optional[str] = ...) -> None: ...

class RedeliverWebhookDeliveryRequest(_message.Message):
    __slots__ = ("delivery_id",)
    DELIVERY_ID_FIELD_NUMBER: _ClassVar[int]
    delivery_id: str
    def __init__(self, delivery_id: _Optional[str] = ...) -> None: ...

class RedeliverWebhookDeliveryResponse(_message.Message):
    __slots__ = ("delivery",)
    DELIVERY_FIELD_NUMBER: _ClassVar[int]
    delivery: WebhookDelivery
    def __init__(self, delivery: _Optional[_Union[WebhookDelivery, _Mapping]] = ...) -> None: ...

class SessionInfo(_message.Message):
    __slots__ = ("session_id", "account_id", "provider", "user_agent", "created_at", "last_used_at", "expires_at", "ends_at", "revoked_at", "active")
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    ACCOUNT_ID_FIELD_NUMBER: _ClassVar[int]
    PROVIDER_FIELD_NUMBER: _ClassVar[int]
    USER_AGENT_FIELD_NUMBER: _ClassVar[int]
    CREATED_AT_FIELD_NUMBER: _ClassVar[int]
    LAST_USED_AT_FIELD_NUMBER: _ClassVar[int]
    EXPIRES_AT_FIELD_NUMBER: _ClassVar[int]
    ENDS_AT_FIELD_NUMBER: _ClassVar[int]
    REVOKED_AT_FIELD_NUMBER: _ClassVar[int]
    ACTIVE_FIELD_NUMBER: _ClassVar[int]
    session_id: str
    account_id: str
    provider: str
    user_agent: str
    created_at: _timestamp_pb2.Timestamp
    last_used_at: _timestamp_pb2.Timestamp
    expires_at: _timestamp_pb2.Timestamp
    ends_at: _timestamp_pb2.Timestamp
    revoked_at: _timestamp_pb2.Timestamp
    active: bool
    def __init__(self, session_id: _Optional[str] = ..., account_id: _Optional[str] = ..., provider: _Optional[str] = ..., user_agent: _Optional[str] = ..., created_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., last_used_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., expires_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., ends_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., revoked_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., active: _Optional[bool] = ...) -> None: ...

class ListSessionsRequest(_message.Message):
    __slots__ = ("account_id", "include_inactive")
    ACCOUNT_ID_FIELD_NUMBER: _ClassVar[int]
    INCLUDE_INACTIVE_FIELD_NUMBER: _ClassVar[int]
    account_id: str
    include_inactive: bool
    def __init__(self, account_id: _Optional[str] = ..., include_inactive: _Optional[bool] = ...) -> None: ...

class ListSessionsResponse(_message.Message):
    __slots__ = ("sessions",)
    SESSIONS_FIELD_NUMBER: _ClassVar[int]
    sessions: _containers.RepeatedCompositeFieldContainer[SessionInfo]
    def __init__(self, sessions: _Optional[_Iterable[_Union[SessionInfo, _Mapping]]] = ...) -> None: ...

class RevokeSessionRequest(_message.Message):
    __slots__ = ("session_id",)
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    session_id: str
    def __init__(self, session_id: _Optional[str] = ...) -> None: ...

class RevokeSessionResponse(_message.Message):
    __slots__ = ("session",)
    SESSION_FIELD_NUMBER: _ClassVar[int]
    session: SessionInfo
    def __init__(self, session: _Optional[_Union[SessionInfo, _Mapping]] = ...) -> None: ...

class RevokeSessionsRequest(_message.Message):
    __slots__ = ("account_id",)
    ACCOUNT_ID_FIELD_NUMBER: _ClassVar[int]
    account_id: str
    def __init__(self, account_id: _Optional[str] = ...) -> None: ...

class RevokeSessionsResponse(_message.Message):
    __slots__ = ("sessions_revoked",)
    SESSIONS_REVOKED_FIELD_NUMBER: _ClassVar[int]
    sessions_revoked: int
    def __init__(self, sessions_revoked: _Optional[int] = ...) -> None: ...

class SetAccountEmailRequest(_message.Message):
    __slots__ = ("account_id", "email")
    ACCOUNT_ID_FIELD_NUMBER: _ClassVar[int]
    EMAIL_FIELD_NUMBER: _ClassVar[int]
    account_id: str
    email: str
    def __init__(self, account_id: _Optional[str] = ..., email: _Optional[str] = ...) -> None: ...

class SetAccountEmailResponse(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class DeactivateAccountRequest(_message.Message):
    __slots__ = ("account_id",)
    ACCOUNT_ID_FIELD_NUMBER: _ClassVar[int]
    account_id: str
    def __init__(self, account_id: _Optional[str] = ...) -> None: ...

class DeactivateAccountResponse(_message.Message):
    __slots__ = ("credentials_revoked",)
    CREDENTIALS_REVOKED_FIELD_NUMBER: _ClassVar[int]
    credentials_revoked: int
    def __init__(self, credentials_revoked: _Optional[int] = ...) -> None: ...

class ReactivateAccountRequest(_message.Message):
    __slots__ = ("account_id",)
    ACCOUNT_ID_FIELD_NUMBER: _ClassVar[int]
    account_id: str
    def __init__(self, account_id: _Optional[str] = ...) -> None: ...

class ReactivateAccountResponse(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class ListWorkspaceStandingAnswersRequest(_message.Message):
    __slots__ = ("account_id", "include_ended")
    ACCOUNT_ID_FIELD_NUMBER: _ClassVar[int]
    INCLUDE_ENDED_FIELD_NUMBER: _ClassVar[int]
    account_id: str
    include_ended: bool
    def __init__(self, account_id: _Optional[str] = ..., include_ended: _Optional[bool] = ...) -> None: ...

class ListWorkspaceStandingAnswersResponse(_message.Message):
    __slots__ = ("standing_answers",)
    STANDING_ANSWERS_FIELD_NUMBER: _ClassVar[int]
    standing_answers: _containers.RepeatedCompositeFieldContainer[_comms_pb2.StandingAnswer]
    def __init__(self, standing_answers: _Optional[_Iterable[_Union[_comms_pb2.StandingAnswer, _Mapping]]] = ...) -> None: ...

class SlackAppInfo(_message.Message):
    __slots__ = ("app_id", "team_id", "email_match", "enabled", "disabled_reason", "created_at", "pending_deliveries", "failed_deliveries", "last_error", "channels")
    APP_ID_FIELD_NUMBER: _ClassVar[int]
    TEAM_ID_FIELD_NUMBER: _ClassVar[int]
    EMAIL_MATCH_FIELD_NUMBER: _ClassVar[int]
    ENABLED_FIELD_NUMBER: _ClassVar[int]
    DISABLED_REASON_FIELD_NUMBER: _ClassVar[int]
    CREATED_AT_FIELD_NUMBER: _ClassVar[int]
    PENDING_DELIVERIES_FIELD_NUMBER: _ClassVar[int]
    FAILED_DELIVERIES_FIELD_NUMBER: _ClassVar[int]
    LAST_ERROR_FIELD_NUMBER: _ClassVar[int]
    CHANNELS_FIELD_NUMBER: _ClassVar[int]
    app_id: str
    team_id: str
    email_match: bool
    enabled: bool
    disabled_reason: str
    created_at: _timestamp_pb2.Timestamp
    pending_deliveries: int
    failed_deliveries: int
    last_error: str
    channels: _containers.RepeatedCompositeFieldContainer[SlackChannelMap]
    def __init__(self, app_id: _Optional[str] = ..., team_id: _Optional[str] = ..., email_match: _Optional[bool] = ..., enabled: _Optional[bool] = ..., disabled_reason: _Optional[str] = ..., created_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., pending_deliveries: _Optional[int] = ..., failed_deliveries: _Optional[int] = ..., last_error: _Optional[str] = ..., channels: _Optional[_Iterable[_Union[SlackChannelMap, _Mapping]]] = ...) -> None: ...

class SlackChannelMap(_message.Message):
    __slots__ = ("channel_id", "slack_channel")
    CHANNEL_ID_FIELD_NUMBER: _ClassVar[int]
    SLACK_CHANNEL_FIELD_NUMBER: _ClassVar[int]
    channel_id: str
    slack_channel: str
    def __init__(self, channel_id: _Optional[str] = ..., slack_channel: _Optional[str] = ...) -> None: ...

class ConnectSlackAppRequest(_message.Message):
    __slots__ = ("team_id", "bot_token", "signing_secret", "email_match")
    TEAM_ID_FIELD_NUMBER: _ClassVar[int]
    BOT_TOKEN_FIELD_NUMBER: _ClassVar[int]
    SIGNING_SECRET_FIELD_NUMBER: _ClassVar[int]
    EMAIL_MATCH_FIELD_NUMBER: _ClassVar[int]
    team_id: str
    bot_token: str
    signing_secret: str
    email_match: bool
    def __init__(self, team_id: _Optional[str] = ..., bot_token: _Optional[str] = ..., signing_secret: _Optional[str] = ..., email_match: _Optional[bool] = ...) -> None: ...

class ConnectSlackAppResponse(_message.Message):
    __slots__ = ("app",)
    APP_FIELD_NUMBER: _ClassVar[int]
    app: SlackAppInfo
    def __init__(self, app: _Optional[_Union[SlackAppInfo, _Mapping]] = ...) -> None: ...

class ListSlackAppsRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class ListSlackAppsResponse(_message.Message):
    __slots__ = ("apps",)
    APPS_FIELD_NUMBER: _ClassVar[int]
    apps: _containers.RepeatedCompositeFieldContainer[SlackAppInfo]
    def __init__(self, apps: _Optional[_Iterable[_Union[SlackAppInfo, _Mapping]]] = ...) -> None: ...

class DisconnectSlackAppRequest(_message.Message):
    __slots__ = ("app_id",)
    APP_ID_FIELD_NUMBER: _ClassVar[int]
    app_id: str
    def __init__(self, app_id: _Optional[str] = ...) -> None: ...

class DisconnectSlackAppResponse(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class MapSlackChannelRequest(_message.Message):
    __slots__ = ("app_id", "channel_id", "slack_channel")
    APP_ID_FIELD_NUMBER: _ClassVar[int]
    CHANNEL_ID_FIELD_NUMBER: _ClassVar[int]
    SLACK_CHANNEL_FIELD_NUMBER: _ClassVar[int]
    app_id: str
    channel_id: str
    slack_channel: str
    def __init__(self, app_id: _Optional[str] = ..., channel_id: _Optional[str] = ..., slack_channel: _Optional[str] = ...) -> None: ...

class MapSlackChannelResponse(_message.Message):
    __slots__ = ("app",)
    APP_FIELD_NUMBER: _ClassVar[int]
    app: SlackAppInfo
    def __init__(self, app: _Optional[_Union[SlackAppInfo, _Mapping]] = ...) -> None: ...

class UnmapSlackChannelRequest(_message.Message):
    __slots__ = ("app_id", "channel_id")
    APP_ID_FIELD_NUMBER: _ClassVar[int]
    CHANNEL_ID_FIELD_NUMBER: _ClassVar[int]
    app_id: str
    channel_id: str
    def __init__(self, app_id: _Optional[str] = ..., channel_id: _Optional[str] = ...) -> None: ...

class UnmapSlackChannelResponse(_message.Message):
    __slots__ = ("app",)
    APP_FIELD_NUMBER: _ClassVar[int]
    app: SlackAppInfo
    def __init__(self, app: _Optional[_Union[SlackAppInfo, _Mapping]] = ...) -> None: ...

class SetWorkspaceFollowUpDefaultRequest(_message.Message):
    __slots__ = ("follow_up",)
    FOLLOW_UP_FIELD_NUMBER: _ClassVar[int]
    follow_up: _comms_pb2.AskFollowUp
    def __init__(self, follow_up: _Optional[_Union[_comms_pb2.AskFollowUp, _Mapping]] = ...) -> None: ...

class SetWorkspaceFollowUpDefaultResponse(_message.Message):
    __slots__ = ("follow_up",)
    FOLLOW_UP_FIELD_NUMBER: _ClassVar[int]
    follow_up: _comms_pb2.AskFollowUp
    def __init__(self, follow_up: _Optional[_Union[_comms_pb2.AskFollowUp, _Mapping]] = ...) -> None: ...

class GetWorkspaceFollowUpDefaultRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class GetWorkspaceFollowUpDefaultResponse(_message.Message):
    __slots__ = ("follow_up",)
    FOLLOW_UP_FIELD_NUMBER: _ClassVar[int]
    follow_up: _comms_pb2.AskFollowUp
    def __init__(self, follow_up: _Optional[_Union[_comms_pb2.AskFollowUp, _Mapping]] = ...) -> None: ...
