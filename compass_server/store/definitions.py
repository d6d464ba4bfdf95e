"""The database's functions, triggers and policies: one file each, under sql/.

Numbered migrations (migrations/) hold tables, indexes and data, and run
once each. Every function lives in sql/functions/<name>.sql (its name
without `compass_`), every trigger in sql/triggers/<trigger>.sql, and a
table's row-level policies in sql/policies/<table>.sql. A file's first line
names the migration it follows (`-- after: 0021`): a database built from
empty gets the file right after that migration, and every database gets it
again, after all migrations, whenever its text changed (schema_definitions
keeps the checksum each file was applied with). Functions come before
triggers and policies of the same migration, each kind in name order.

A function's signature is its contract with the servers of the release
before, which keep running while a newer one applies the files: a file
changes a body, never a signature; a new signature is a new function.
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import importlib.resources
import re

# The order kinds are applied in after the same migration.
KINDS = ("functions", "triggers", "policies")

_AFTER = re.compile(r"\A-- after: (\d{4})\n")


@dataclasses.dataclass(frozen=True)
class Definition:
    path: str
    after: int
    text: str

    @property
    def checksum(self) -> str:
        return hashlib.sha256(self.text.encode()).hexdigest()


@functools.cache
def definitions() -> tuple[Definition, ...]:
    """Every definition file, in the order they are applied."""
    root = importlib.resources.files("compass_server.store").joinpath("sql")
    found = []
    for rank, kind in enumerate(KINDS):
        for entry in sorted(root.joinpath(kind).iterdir(), key=lambda e: e.name):
            if not entry.name.endswith(".sql"):
                continue
            text = entry.read_text()
            m = _AFTER.match(text)
            if m is None:
                raise RuntimeError(f"sql/{kind}/{entry.name} does not start with -- after: NNNN")
            found.append((int(m.group(1)), rank, Definition(f"{kind}/{entry.name}", 0, text)))
    found.sort(key=lambda x: (x[0], x[1], x[2].path))
    return tuple(dataclasses.replace(d, after=after) for after, _, d in found)
