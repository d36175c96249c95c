"""Prompt prefix blocks and an index of which engine most likely holds them.

The router never tokenises (that would cost more than routing itself), so prompts are cut
into fixed-size character blocks, like the vLLM production-stack router's 128-character
chunks. Block hashes are chained (block *i*'s hash covers blocks 0..i), so two prompts
share block *i* only if they share the whole prefix up to it, which is exactly what an
engine's prefix cache can reuse.

``PrefixIndex`` remembers, for each block hash, the endpoints the router recently sent it
to, in least-recently-used order with a bounded size. It is an approximation of the
engines' caches (which evict on their own); the routing policies use it only together
with load, never alone.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Iterable, Sequence
from itertools import islice
from typing import Final

DEFAULT_BLOCK_CHARS: Final = 128
"""About 32 tokens of English text, two of vLLM's 16-token KV blocks."""
DEFAULT_MAX_BLOCKS: Final = 256
"""Hash at most this many leading blocks (32 KiB of prompt); the rest rarely matters."""
DEFAULT_INDEX_CAPACITY: Final = 200_000
"""Block hashes remembered; about 30 MB, a few thousand long prompts per engine."""
CHARS_PER_TOKEN: Final = 4.0
"""Prompt length estimate without a tokenizer (English-like text)."""


def block_hashes(
    text: str, block_chars: int = DEFAULT_BLOCK_CHARS, max_blocks: int = DEFAULT_MAX_BLOCKS
) -> tuple[int, ...]:
    """Chained hashes of the complete leading blocks of ``text`` (a partial tail block is
    left out: engines cache whole blocks only)."""
    n = min(len(text) // block_chars, max_blocks)
    out = []
    h = 0
    for i in range(n):
        h = hash((h, text[i * block_chars : (i + 1) * block_chars]))
        out.append(h)
    return tuple(out)


class PrefixIndex:
    """Block hash -> endpoints that were sent a prompt containing it (LRU-bounded)."""

    __slots__ = ("_entries", "capacity")

    def __init__(self, capacity: int = DEFAULT_INDEX_CAPACITY) -> None:
        self.capacity = capacity
        self._entries: OrderedDict[int, set[str]] = OrderedDict()

    def __len__(self) -> int:
        return len(self._entries)

    def match(self, hashes: Sequence[int], urls: Iterable[str]) -> dict[str, int]:
        """Number of leading blocks of ``hashes`` each of ``urls`` holds (0s left out).

        A binary search per endpoint over the chain (holding block *i* implies having
        held blocks 0..i-1, and ``insert`` keeps the earliest blocks the most recently
        used so eviction preserves that), so the cost is O(len(urls) x log(blocks)) no
        matter how many endpoints share a prefix.
        """
        entries = self._entries
        n = len(hashes)
        out: dict[str, int] = {}
        if not n:
            return out
        first = entries.get(hashes[0])
        if not first:
            return out
        for url in urls:
            if url not in first:
                continue
            lo, hi = 1, n  # invariant: url holds the first lo blocks
            while lo < hi:
                mid = (lo + hi + 1) // 2
                owners = entries.get(hashes[mid - 1])
                if owners is not None and url in owners:
                    lo = mid
                else:
                    hi = mid - 1
            out[url] = lo
        return out

    def deepest_holders(self, hashes: Sequence[int], limit: int = 4) -> tuple[int, list[str]]:
        """Up to ``limit`` endpoints holding the longest prefix of ``hashes``, and its
        length in blocks; (0, []) when nobody holds the first block."""
        entries = self._entries
        lo, hi = 0, len(hashes)  # find the last i with owners (prefix-monotone)
        while lo < hi:
            mid = (lo + hi + 1) // 2
            if entries.get(hashes[mid - 1]):
                lo = mid
            else:
                hi = mid - 1
        if lo == 0:
            return 0, []
        owners = entries[hashes[lo - 1]]
        return lo, list(islice(owners, limit))

    def insert(self, hashes: Sequence[int], url: str) -> None:
        """Record that ``url`` was sent a prompt with these leading blocks.

        Deepest block first, so the first blocks end up most recently used: eviction then
        drops the ends of chains first, as an engine's prefix cache does.
        """
        entries = self._entries
        for h in reversed(hashes):
            owners = entries.get(h)
            if owners is None:
                entries[h] = {url}
            else:
                owners.add(url)
                entries.move_to_end(h)
        while len(entries) > self.capacity:
            entries.popitem(last=False)

    def forget(self, url: str) -> None:
        """Drop ``url`` everywhere (its engine restarted or left: its cache is gone)."""
        empty = []
        for h, owners in self._entries.items():
            owners.discard(url)
            if not owners:
                empty.append(h)
        for h in empty:
            del self._entries[h]
