"""Pictures an agent attaches to its inbox posts and replies: files of its
own sandbox, a folder its runner (or compass-mcp) is started with.

    sandbox = Sandbox("/work/agent")
    read = sandbox.read_all(["shots/login.png"])     # or schema.Refused
    text = attach("The form breaks, see shots/login.png.", read)
    # "The form breaks, see attachment:login.png."

Each path is read relative to the sandbox (an absolute path must lie in
it), with every symlink resolved: a path that leaves the sandbox, or a
symlink that points out of it, is refused, and so is anything but a regular
file (a folder, a pipe), a file over MAX_PICTURE_BYTES, pictures together
over MAX_PICTURE_BYTES_PER_CALL, and bytes that are no PNG, JPEG, GIF or
WebP image (the type comes from the bytes, as the server reads it). The
server checks all of it again; checking here first means nothing is sent
that it would refuse, and one call can't fill the relay stream it shares
with other agents.

A picture is named by its file name, made plain (letters, digits, `.`, `_`,
`-`) and unique within the message. Wherever the text names a picture's path
outside code (`` `…` `` and fenced blocks stay as written), as the agent gave
it or as the same file's absolute path, the path becomes `attachment:<name>`,
the way an email's text names its attachments by `cid:`: the server mints
the attachment's id in the write, and there draws each such name by the
picture's address, `/inbox/<item>/files/<attachment>`.
"""

from __future__ import annotations

import contextlib
import os
import pathlib
import re
import stat
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass

from compass_agentkit.schema import Refused

__all__ = [
    "ADDRESS",
    "MAX_PICTURES",
    "MAX_PICTURE_BYTES",
    "MAX_PICTURE_BYTES_PER_CALL",
    "TYPES",
    "Picture",
    "Sandbox",
    "attach",
    "outside_code",
    "sniff",
]

# The server checks pictures by these same limits and sniffing.
MAX_PICTURE_BYTES = 5 * 1024 * 1024
MAX_PICTURES = 10
# All pictures of one call: the relay frame that carries them, with the
# message's text, must stay under the server's 8 MiB request limit.
MAX_PICTURE_BYTES_PER_CALL = 6 * 1024 * 1024
MAX_NAME_CHARS = 200

# Leading bytes → type; WebP is a RIFF container whose form type is WEBP.
_MAGIC = (
    (b"\x89PNG\r\n\x1a\n", "image/png"),
    (b"\xff\xd8\xff", "image/jpeg"),
    (b"GIF87a", "image/gif"),
    (b"GIF89a", "image/gif"),
)
TYPES = frozenset({"image/png", "image/jpeg", "image/gif", "image/webp"})

ADDRESS = "attachment:"


def sniff(data: bytes) -> str | None:
    """The image type the bytes are, or None when they are none Compass takes."""
    for magic, kind in _MAGIC:
        if data.startswith(magic):
            return kind
    if len(data) >= 12 and data[:4] == b"RIFF" and data[8:12] == b"WEBP":
        return "image/webp"
    return None


@dataclass(frozen=True, slots=True)
class Picture:
    # The path as the agent gave it.
    path: str
    # Every way text may name the file: as given, normalised, absolute.
    forms: tuple[str, ...]
    name: str
    content_type: str
    data: bytes

    @property
    def address(self) -> str:
        return ADDRESS + self.name


def _plain(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]+", "-", name)[:MAX_NAME_CHARS] or "picture"


def _unique(name: str, taken: set[str]) -> str:
    stem, dot, ext = name.rpartition(".")
    if not stem:
        stem, dot, ext = name, "", ""
    found, n = name, 1
    while found in taken:
        n += 1
        found = f"{stem}-{n}{dot}{ext}"
    return found


class Sandbox:
    """The folder an agent's pictures are read from, and nothing outside it."""

    def __init__(self, root: str | os.PathLike[str]) -> None:
        path = pathlib.Path(root)
        if not path.is_dir():
            raise ValueError(f"the sandbox {str(path)!r} is not a folder")
        self.root = path.resolve()

    def read_all(self, paths: Sequence[str]) -> list[Picture]:
        """Each path's picture, in order, or the first reason one is refused."""
        if len(paths) > MAX_PICTURES:
            raise Refused(
                "resource_exhausted",
                f"a message carries at most {MAX_PICTURES} pictures; this one has {len(paths)}",
            )
        read: list[Picture] = []
        total = 0
        for path in paths:
            picture = self.read(path, taken={p.name for p in read})
            total += len(picture.data)
            if total > MAX_PICTURE_BYTES_PER_CALL:
                raise Refused(
                    "resource_exhausted",
                    f"these pictures come to more than {MAX_PICTURE_BYTES_PER_CALL} bytes; the "
                    f"limit is {MAX_PICTURE_BYTES_PER_CALL} bytes for one message",
                )
            read.append(picture)
        return read

    def read(self, path: str, taken: Collection[str] = ()) -> Picture:
        """The picture at `path`, named apart from the names `taken`."""
        shown = repr(path[:200])
        if not path or "\x00" in path:
            raise Refused("invalid_argument", f"picture {shown} is no path")
        joined = os.path.normpath(os.path.join(self.root, path))
        real = os.path.realpath(joined)
        if not self._holds(real):
            raise Refused(
                "permission_denied", f"picture {shown} is outside your sandbox {self.root}"
            )
        try:
            # Not following a last symlink and not waiting on a pipe's writer.
            fd = os.open(real, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
        except FileNotFoundError:
            raise Refused("not_found", f"picture {shown} is not a file in your sandbox") from None
        except OSError as exc:
            raise Refused(
                "permission_denied", f"picture {shown} can't be read ({exc.strerror})"
            ) from None
        try:
            data = self._read_open(fd, shown)
        finally:
            os.close(fd)
        if len(data) > MAX_PICTURE_BYTES:
            raise Refused(
                "resource_exhausted",
                f"picture {shown} is over {MAX_PICTURE_BYTES} bytes; the limit is "
                f"{MAX_PICTURE_BYTES}",
            )
        kind = sniff(data)
        if kind is None:
            raise Refused(
                "invalid_argument", f"picture {shown} is not a PNG, JPEG, GIF or WebP image"
            )
        relative = os.path.relpath(joined, self.root)
        forms = (path, os.path.normpath(path), f"./{relative}", relative, joined)
        return Picture(
            path=path,
            forms=tuple(dict.fromkeys(forms)),
            name=_unique(_plain(os.path.basename(joined)), set(taken)),
            content_type=kind,
            data=data,
        )

    def _read_open(self, fd: int, shown: str) -> bytes:
        opened = os.fstat(fd)
        if not stat.S_ISREG(opened.st_mode):
            raise Refused("invalid_argument", f"picture {shown} is not a file")
        # What was opened, not what the path named a moment before.
        with contextlib.suppress(OSError):
            if not self._holds(os.readlink(f"/proc/self/fd/{fd}")):
                raise Refused(
                    "permission_denied", f"picture {shown} is outside your sandbox {self.root}"
                )
        if opened.st_size > MAX_PICTURE_BYTES:
            raise Refused(
                "resource_exhausted",
                f"picture {shown} is {opened.st_size} bytes; the limit is {MAX_PICTURE_BYTES}",
            )
        chunks: list[bytes] = []
        left = MAX_PICTURE_BYTES + 1  # a file that grew since fstat is caught below
        while left > 0:
            chunk = os.read(fd, min(left, 1 << 20))
            if not chunk:
                break
            chunks.append(chunk)
            left -= len(chunk)
        return b"".join(chunks)

    def _holds(self, real: str) -> bool:
        return os.path.commonpath([real, self.root]) == str(self.root)


# Code: a fenced block (``` or ~~~, to its closing fence or the end) or an
# inline span. The server draws names by this same rule.
_CODE = re.compile(r"(```[\s\S]*?(?:```|\Z)|~~~[\s\S]*?(?:~~~|\Z)|`[^`\n]+`)")


def outside_code(text: str, rewrite: Callable[[str], str]) -> str:
    """The text with `rewrite` applied to each part outside code; code stays
    as written."""
    parts = _CODE.split(text)
    for i in range(0, len(parts), 2):  # even parts lie outside code
        parts[i] = rewrite(parts[i])
    return "".join(parts)


def attach(text: str, pictures: Sequence[Picture]) -> str:
    """The text with each picture's path, outside code, as its address."""
    forms = sorted(
        ((form, p.address) for p in pictures for form in p.forms if form), key=lambda f: -len(f[0])
    )
    if not forms or not text:
        return text
    address = dict(forms)
    # A whole path only: not part of a longer path or file name.
    path = re.compile(
        r"(?<![\w./~-])(" + "|".join(re.escape(f) for f, _ in forms) + r")(?![\w/~-]|\.\w)"
    )
    return outside_code(text, lambda part: path.sub(lambda m: address[m.group(1)], part))
