"""The Connect codecs and compression: a body that can't be decoded is
INVALID_ARGUMENT with one fixed sentence naming the message type, never the
decoder's exception text.

JSON ignores fields it doesn't know (a newer client's), but not an enum name
it doesn't know: a filter on an unknown status would otherwise read as no
filter at all.
"""

from __future__ import annotations

import functools
import json
import re
from typing import Any, TypeVar, cast

from connectrpc.code import Code
from connectrpc.compression.gzip import GzipCompression
from connectrpc.errors import ConnectError
from google.protobuf import json_format
from google.protobuf.descriptor import Descriptor, FieldDescriptor
from google.protobuf.message import Message

from compass_server.store.errors import quoted

M = TypeVar("M", bound=Message)


def _refused(message_class: type[Message], form: str) -> ConnectError:
    name = message_class.DESCRIPTOR.full_name
    return ConnectError(Code.INVALID_ARGUMENT, f"the request body is not a valid {name} in {form}")


class BinaryCodec:
    def name(self) -> str:
        return "proto"

    def encode(self, message: Message) -> bytes:
        return message.SerializeToString()

    def decode(self, data: bytes | bytearray, message_class: type[M]) -> M:
        try:
            return message_class.FromString(bytes(data))
        except Exception:
            raise _refused(message_class, "binary protobuf") from None


def _no_repeated_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in pairs:
        if key in out:
            raise ValueError("a key appears twice")
        out[key] = value
    return out


class JsonCodec:
    def name(self) -> str:
        return "json"

    def encode(self, message: Message) -> bytes:
        return json_format.MessageToJson(message).encode()

    def decode(self, data: bytes | bytearray, message_class: type[M]) -> M:
        try:
            body = json.loads(bytes(data).decode("utf-8"), object_pairs_hook=_no_repeated_keys)
        except (ValueError, RecursionError):
            raise _refused(message_class, "JSON") from None
        if _SURROGATE_ESCAPE.search(data) is not None and _has_lone_surrogate(body):
            raise _refused(message_class, "JSON")
        known = _known_fields(body, cast(Descriptor, message_class.DESCRIPTOR), "")
        message = message_class()
        try:
            json_format.ParseDict(known, message)
        except Exception:
            # The runtime's own failures too (a lone surrogate in a key).
            raise _refused(message_class, "JSON") from None
        return message


# A JSON escape of a UTF-16 surrogate: only a body with one needs the walk.
_SURROGATE_ESCAPE = re.compile(rb"\\u[dD][89a-fA-F]")


def _has_lone_surrogate(body: Any) -> bool:
    """JSON's \\ud800 escapes decode to strings no UTF-8 can carry."""
    stack = [body]
    while stack:
        item = stack.pop()
        if isinstance(item, str):
            try:
                item.encode("utf-8")
            except UnicodeEncodeError:
                return True
        elif isinstance(item, dict):
            stack.extend(item.keys())
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
    return False


def _known_fields(body: Any, d: Descriptor, where: str) -> Any:
    """The body without the fields `d` doesn't have; an enum name `d` doesn't
    have is refused, naming the field."""
    if not isinstance(body, dict):
        return body
    out = {}
    for key, value in body.items():
        field = _json_names(d).get(key) or d.fields_by_name.get(key)
        if field is None:
            continue
        path = f"{where}.{field.name}" if where else field.name
        items = value if field.is_repeated and isinstance(value, list) else None
        sub = field.message_type
        if sub is not None:
            if sub.GetOptions().map_entry or sub.full_name.startswith("google.protobuf."):
                out[key] = value
            elif items is not None:
                out[key] = [_known_fields(v, sub, f"{path}[{i}]") for i, v in enumerate(items)]
            else:
                out[key] = _known_fields(value, sub, path)
            continue
        if field.enum_type is not None:
            if items is not None:
                for i, v in enumerate(items):
                    _check_enum(v, field, f"{path}[{i}]")
            else:
                _check_enum(value, field, path)
        out[key] = value
    return out


@functools.cache
def _json_names(d: Descriptor) -> dict[str, FieldDescriptor]:
    return {f.json_name: f for f in d.fields}


def _check_enum(value: Any, field: FieldDescriptor, path: str) -> None:
    assert field.enum_type is not None
    names = field.enum_type.values_by_name
    if isinstance(value, str) and value not in names:
        raise ConnectError(
            Code.INVALID_ARGUMENT,
            f"{path} has no value {quoted(value)}; it takes one of: " + ", ".join(names),
        )


class Gzip(GzipCompression):
    def decompress(
        self, data: bytes | bytearray | memoryview, read_max_bytes: int | None = None
    ) -> bytes:
        try:
            return super().decompress(data, read_max_bytes)
        except ConnectError:
            raise
        except Exception:
            raise ConnectError(
                Code.INVALID_ARGUMENT, "the request body is not valid gzip"
            ) from None


CODECS = (BinaryCodec(), JsonCodec())
COMPRESSIONS = (Gzip(),)
