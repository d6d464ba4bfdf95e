"""Pictures are files of an inbox message. Their type comes from their bytes,
never from what the sender declares. The limits and the sniffing are the
agent kit's, so what the kit checks before sending is what is checked here."""

from __future__ import annotations

import re
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from compass_agentkit.pictures import ADDRESS as NAMED
from compass_agentkit.pictures import (
    MAX_NAME_CHARS,
    MAX_PICTURE_BYTES,
    MAX_PICTURES,
    TYPES,
    outside_code,
    sniff,
)
from compass_server.store.errors import InvalidArgument, ResourceExhausted

__all__ = [
    "MAX_NAME_CHARS",
    "MAX_PICTURES",
    "MAX_PICTURE_BYTES",
    "NAMED",
    "TYPES",
    "CheckedPicture",
    "Picture",
    "address",
    "check_pictures",
    "draw",
    "sniff",
]


@dataclass(frozen=True, slots=True)
class Picture:
    """A picture as sent: a file name and its bytes."""

    name: str
    data: bytes


@dataclass(frozen=True, slots=True)
class CheckedPicture:
    name: str
    content_type: str
    data: bytes


def check_pictures(pictures: Sequence[Picture]) -> list[CheckedPicture]:
    """The pictures with their sniffed types, or the first broken rule."""
    if len(pictures) > MAX_PICTURES:
        raise ResourceExhausted(
            f"a message carries at most {MAX_PICTURES} pictures; this one has {len(pictures)}"
        )
    out = []
    for i, p in enumerate(pictures):
        name = p.name or f"picture-{i + 1}"
        if len(name) > MAX_NAME_CHARS or "/" in name or "\\" in name or "\x00" in name:
            raise InvalidArgument(
                f"picture {i} needs a plain file name of at most {MAX_NAME_CHARS} characters"
            )
        if len(p.data) > MAX_PICTURE_BYTES:
            raise ResourceExhausted(
                f"picture {i} ({name!r}) is {len(p.data)} bytes; the limit is {MAX_PICTURE_BYTES}"
            )
        kind = sniff(p.data)
        if kind is None:
            raise InvalidArgument(f"picture {i} ({name!r}) is not a PNG, JPEG, GIF or WebP image")
        out.append(CheckedPicture(name, kind, p.data))
    return out


# The agent kit names a picture in its message's text by `attachment:<name>`
# (the id doesn't exist until the write mints it); the write draws it by its
# address. Code is left as written, by the kit's own rule (outside_code).


def address(item_id: uuid.UUID, attachment_id: uuid.UUID) -> str:
    """Where a picture's bytes are served (GET, with the reader's token)."""
    return f"/inbox/{item_id}/files/{attachment_id}"


def draw(text: str, addresses: Mapping[str, str]) -> str:
    """The text with each `attachment:<name>` of a picture of this message,
    outside code, replaced by that picture's address."""
    if NAMED not in text or not addresses:
        return text
    names = "|".join(re.escape(n) for n in sorted(addresses, key=len, reverse=True))
    # A whole name: not followed by more of a name (`login.png.bak`), though a
    # sentence's full stop may follow it.
    named = re.compile(rf"{re.escape(NAMED)}({names})(?![\w-]|\.[\w-])")

    return outside_code(text, lambda part: named.sub(lambda m: addresses[m.group(1)], part))
