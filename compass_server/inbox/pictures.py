"""Pictures are files of an inbox message. Their type comes from their bytes,
never from what the sender declares."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from compass_server.store.errors import InvalidArgument, ResourceExhausted

MAX_PICTURE_BYTES = 5 * 1024 * 1024
MAX_PICTURES = 10
MAX_NAME_CHARS = 200

# Leading bytes → type; WebP is a RIFF container whose form type is WEBP.
_MAGIC = (
    (b"\x89PNG\r\n\x1a\n", "image/png"),
    (b"\xff\xd8\xff", "image/jpeg"),
    (b"GIF87a", "image/gif"),
    (b"GIF89a", "image/gif"),
)
TYPES = frozenset({"image/png", "image/jpeg", "image/gif", "image/webp"})


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


def sniff(data: bytes) -> str | None:
    """The image type the bytes are, or None when they are none we take."""
    for magic, kind in _MAGIC:
        if data.startswith(magic):
            return kind
    if len(data) >= 12 and data[:4] == b"RIFF" and data[8:12] == b"WEBP":
        return "image/webp"
    return None


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
