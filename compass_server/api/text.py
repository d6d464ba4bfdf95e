"""One rule for every string a client sends, on every surface: no control
characters where they make no sense.

NUL is never taken (PostgreSQL can't store it). Tab, line feed and carriage
return are taken in free text (a message, a question, a topic, a reason, a
person's own words); ids, keys, names, labels and tokens take no control
character at all. Refused at the edge, before any rule of the store, as
INVALID_ARGUMENT naming the field: Connect and gRPC by `check_strings`, the
surfaces that read a person's words from a form (a one-ask link, Slack) by
`check_text` and `check_line`.
"""

from __future__ import annotations

import re

from google.protobuf.descriptor import FieldDescriptor
from google.protobuf.message import Message

from compass_server.store.errors import InvalidArgument

# String fields, by name, that hold free text.
FREE_TEXT = frozenset(
    {"text", "question", "description", "preview", "custom_text"}
    | {"topic", "body", "reason", "query"}
)
# C0 controls, DEL and C1 controls; free text keeps tab, line feed and carriage
# return. And half of a UTF-16 pair, which JSON can spell (\ud800) and UTF-8 can't.
_IN_TEXT = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f\ud800-\udfff]")
_IN_LINE = re.compile("[\x00-\x1f\x7f-\x9f\ud800-\udfff]")


def check_strings(message: Message, where: str = "") -> None:
    """Every string set in `message`, however deep; the first offending field
    is named by its path (`blocks[0].text.text`)."""
    for field, value in message.ListFields():
        path = f"{where}.{field.name}" if where else field.name
        if field.type == FieldDescriptor.TYPE_MESSAGE:
            if field.is_repeated:
                for i, item in enumerate(value):
                    check_strings(item, f"{path}[{i}]")
            else:
                check_strings(value, path)
        elif field.type == FieldDescriptor.TYPE_STRING:
            check = check_text if field.name in FREE_TEXT else check_line
            if field.is_repeated:
                for i, item in enumerate(value):
                    check(item, f"{path}[{i}]")
            else:
                check(value, path)


def check_text(value: str, name: str) -> None:
    """Free text (a person's words): tab, line feed and carriage return, no
    other control character."""
    _check(_IN_TEXT, value, name)


def without_refused(value: str) -> str:
    """Free text less what `check_text` refuses: what a form shows back to
    be put right."""
    return _IN_TEXT.sub("", value)


def check_line(value: str, name: str) -> None:
    """An id, a key, a name: no control character at all."""
    _check(_IN_LINE, value, name)


def _check(pattern: re.Pattern[str], value: str, name: str) -> None:
    found = pattern.search(value)
    if found is not None and found.group() >= "\ud800":
        raise InvalidArgument(f"{name} is not Unicode text (a lone surrogate at {found.start()})")
    if found is not None:
        raise InvalidArgument(
            f"{name} has a control character (U+{ord(found.group()):04X}) at position "
            f"{found.start()}; "
            + (
                "text takes tab, line feed and carriage return, no other"
                if pattern is _IN_TEXT
                else "it takes none"
            )
        )
