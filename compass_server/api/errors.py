"""The one error table: store errors → status codes, for every surface.

An ApiError's message goes to clients as it is. Never put database or
exception text in it; anything unexpected becomes INTERNAL with a generic
message and an id that is logged beside the real cause.
"""

from __future__ import annotations

import enum
import logging
import uuid

from compass_server.store import errors as store_errors

log = logging.getLogger(__name__)


class Status(enum.Enum):
    """The status codes clients can see; `token` is the snake_case name the
    relay's in-band error carries and Connect puts on the wire."""

    INVALID_ARGUMENT = "invalid_argument"
    NOT_FOUND = "not_found"
    ALREADY_EXISTS = "already_exists"
    PERMISSION_DENIED = "permission_denied"
    RESOURCE_EXHAUSTED = "resource_exhausted"
    FAILED_PRECONDITION = "failed_precondition"
    UNAUTHENTICATED = "unauthenticated"
    UNAVAILABLE = "unavailable"
    UNIMPLEMENTED = "unimplemented"
    INTERNAL = "internal"

    @property
    def token(self) -> str:
        return self.value

    @property
    def http(self) -> int:
        """The HTTP status Connect gives this code, for plain HTTP routes."""
        return _HTTP.get(self, 500)


_HTTP = {
    Status.INVALID_ARGUMENT: 400,
    Status.NOT_FOUND: 404,
    Status.ALREADY_EXISTS: 409,
    Status.PERMISSION_DENIED: 403,
    Status.RESOURCE_EXHAUSTED: 429,
    Status.FAILED_PRECONDITION: 400,
    Status.UNAUTHENTICATED: 401,
    Status.UNAVAILABLE: 503,
    Status.UNIMPLEMENTED: 501,
}


# The last guard on what a client is told: gRPC carries the message in its
# trailers, whose size is limited.
MAX_ERROR_CHARS = 1_000


class ApiError(Exception):
    def __init__(self, status: Status, message: str) -> None:
        if len(message) > MAX_ERROR_CHARS:
            message = message[: MAX_ERROR_CHARS - 1] + "…"
        super().__init__(message)
        self.status = status
        self.message = message


TABLE: dict[type[store_errors.StoreError], Status] = {
    store_errors.NotFound: Status.NOT_FOUND,
    store_errors.PermissionDenied: Status.PERMISSION_DENIED,
    store_errors.Conflict: Status.ALREADY_EXISTS,
    store_errors.InvalidArgument: Status.INVALID_ARGUMENT,
    store_errors.FailedPrecondition: Status.FAILED_PRECONDITION,
    store_errors.Unauthenticated: Status.UNAUTHENTICATED,
    store_errors.ResourceExhausted: Status.RESOURCE_EXHAUSTED,
    store_errors.Unavailable: Status.UNAVAILABLE,
}


def to_api_error(exc: BaseException) -> ApiError:
    if isinstance(exc, ApiError):
        return exc
    if isinstance(exc, store_errors.StoreError):
        status = TABLE.get(type(exc))
        if status is not None:
            return ApiError(status, exc.message)
    incident = uuid.uuid4().hex[:12]
    log.error("internal error %s", incident, exc_info=exc)
    return ApiError(Status.INTERNAL, f"internal error (incident {incident})")
