"""A least-recently-used map bounded by the bytes its entries weigh in
memory, not by their count: a few large values can't outgrow it."""

from __future__ import annotations

import collections
from typing import Generic, TypeVar

from compass_server.store.weight import weigh

K = TypeVar("K")
V = TypeVar("V")

# What an entry costs besides its key and value (the map's slot and node, the
# held pair and its size): ~180 bytes as tracemalloc measures it, and room
# for the map's growth.
ENTRY_BYTES = 250


class SizedCache(Generic[K, V]):
    def __init__(self, max_bytes: int) -> None:
        self.max_bytes = max_bytes
        self.bytes = 0
        self._entries: collections.OrderedDict[K, tuple[V, int]] = collections.OrderedDict()

    def __len__(self) -> int:
        return len(self._entries)

    def get(self, key: K) -> V | None:
        found = self._entries.get(key)
        if found is None:
            return None
        self._entries.move_to_end(key)
        return found[0]

    def put(self, key: K, value: V, size: int) -> None:
        """Keeps `value`, evicting the least recently used; `size` is what the
        value weighs in memory (`weight.weigh`, or a bytes object's length).
        A value that alone is over the bound is not kept."""
        size += ENTRY_BYTES + weigh(key)
        old = self._entries.pop(key, None)
        if old is not None:
            self.bytes -= old[1]
        if size > self.max_bytes:
            return
        self._entries[key] = (value, size)
        self.bytes += size
        while self.bytes > self.max_bytes:
            _, (_, evicted) = self._entries.popitem(last=False)
            self.bytes -= evicted
