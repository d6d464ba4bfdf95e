"""What a value really weighs in this process: its objects' bytes as Python
holds them, which is several times its encoded bytes when it is many small
fields (an ask of many one-letter options weighs ~6× its JSON). Memory
bounds that keep decoded values count this, not the encoded size."""

from __future__ import annotations

import enum
import operator
import sys
import uuid
from collections.abc import Callable
from typing import Any

_size = sys.getsizeof
# A UUID's own int, which getsizeof leaves out.
_UUID_INT = _size(1 << 127)

_Weigher = Callable[[Any], int]
_weighers: dict[type, _Weigher] = {}


def weigh(value: Any) -> int:
    """The bytes of `value` and of everything it holds, each object counted
    where it is held (one held twice counts twice: an upper bound), shared
    ones (None, booleans, enum members, one-character strings) not at all."""
    weigher = _weighers.get(type(value))
    if weigher is None:
        weigher = _weighers[type(value)] = _weigher_of(type(value))
    return weigher(value)


def _free(_: Any) -> int:
    return 0


def _str(s: str) -> int:
    # CPython keeps one copy of "" and of each one-character Latin-1 string.
    if len(s) > 1:
        return _size(s)
    return 0 if not s or ord(s) < 256 else _size(s)


def _seq(value: tuple[Any, ...] | list[Any]) -> int:
    return _size(value) + sum(map(weigh, value))


def _dict(value: dict[Any, Any]) -> int:
    return _size(value) + sum(map(weigh, value)) + sum(map(weigh, value.values()))


def _uuid(value: uuid.UUID) -> int:
    return _size(value) + _UUID_INT


def _weigher_of(kind: type) -> _Weigher:
    if kind in (type(None), bool) or issubclass(kind, enum.Enum):
        return _free
    if issubclass(kind, str):
        return _str
    if issubclass(kind, (tuple, list)):
        return _seq
    if issubclass(kind, dict):
        return _dict
    if issubclass(kind, uuid.UUID):
        return _uuid
    slots = [
        name
        for k in kind.__mro__
        for name in _names(getattr(k, "__slots__", ()))
        if name != "__weakref__"
    ]
    if slots and not kind.__dictoffset__:
        fields = operator.attrgetter(*slots)
        if len(slots) == 1:

            def one(value: Any) -> int:
                return _size(value) + weigh(fields(value))

            return one

        def held(value: Any) -> int:
            return _size(value) + sum(map(weigh, fields(value)))

        return held
    if kind.__dictoffset__:

        def attrs(value: Any) -> int:
            d = getattr(value, "__dict__", None)
            return _size(value) + (_dict(d) if isinstance(d, dict) else 0)

        return attrs
    return _size  # ints, floats, bytes, datetimes: flat


def _names(slots: str | tuple[str, ...]) -> tuple[str, ...]:
    return (slots,) if isinstance(slots, str) else tuple(slots)
