"""The KV cache as vLLM's block pool sees it: fixed-size blocks, prefix caching, LRU (pure).

Only block *counts* and *hashes* matter to the simulator, so blocks have no ids:

* a referenced block with a hash (a full prompt block) lives in ``_refs`` with its
  reference count; requests with the same prefix share it;
* a referenced block without a hash (the partial last block, generated tokens) is
  counted in ``_anon``;
* an unreferenced block that still holds a hash stays cached in ``_evictable``, oldest
  first. It counts as free, as in vLLM (``kv_cache_usage`` = 1 - free / total), and is
  evicted (its hash forgotten) only when a fresh block is needed and no truly empty one
  is left.

Invariant (tested): ``len(_refs) + _anon <= num_blocks`` at all times; ``allocate``
refuses anything that would break it.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass

from eagle_eye.errors import EagleEyeError


@dataclass(frozen=True, slots=True)
class PrefixHit:
    """Result of looking a request's block hashes up in the cache."""

    blocks: int
    """Leading blocks found (referenced or evictable)."""
    evictable: int
    """How many of them sit in the evictable pool (acquiring them uses free space)."""


class KVCacheFullError(EagleEyeError, RuntimeError):
    """An allocation was attempted without checking ``can_allocate`` first."""


class KVCache:
    """Block pool with automatic prefix caching and LRU eviction of free cached blocks."""

    __slots__ = (
        "_anon",
        "_evictable",
        "_refs",
        "block_size",
        "enable_prefix_caching",
        "evictions",
        "num_blocks",
    )

    def __init__(self, num_blocks: int, block_size: int, *, enable_prefix_caching: bool = True):
        if num_blocks <= 0 or block_size <= 0:
            raise ValueError("num_blocks and block_size must be positive")
        self.num_blocks = num_blocks
        self.block_size = block_size
        self.enable_prefix_caching = enable_prefix_caching
        self._refs: dict[int, int] = {}
        self._evictable: OrderedDict[int, None] = OrderedDict()
        self._anon = 0
        self.evictions = 0

    # -- views ---------------------------------------------------------------------------

    @property
    def used_blocks(self) -> int:
        """Blocks referenced by at least one request."""
        return len(self._refs) + self._anon

    @property
    def free_blocks(self) -> int:
        """Blocks a new allocation may take (empty plus evictable cached ones)."""
        return self.num_blocks - len(self._refs) - self._anon

    @property
    def cached_blocks(self) -> int:
        """Blocks holding a reusable hash (referenced or evictable)."""
        return len(self._refs) + len(self._evictable)

    @property
    def usage(self) -> float:
        """Fraction 0-1 in use, like ``vllm:kv_cache_usage_perc``."""
        return self.used_blocks / self.num_blocks

    def contains(self, block_hash: int) -> bool:
        return block_hash in self._refs or block_hash in self._evictable

    # -- operations ----------------------------------------------------------------------

    def lookup(self, hashes: Sequence[int], max_blocks: int) -> PrefixHit:
        """Leading blocks of ``hashes`` (at most ``max_blocks``) already cached."""
        if not self.enable_prefix_caching:
            return PrefixHit(0, 0)
        refs, evictable = self._refs, self._evictable
        n = ev = 0
        for h in hashes[:max_blocks]:
            if h in refs:
                n += 1
            elif h in evictable:
                n += 1
                ev += 1
            else:
                break
        return PrefixHit(n, ev)

    def can_allocate(self, new_blocks: int, hit: PrefixHit | None = None) -> bool:
        """Whether ``new_blocks`` fresh blocks (after acquiring ``hit``) fit."""
        extra = hit.evictable if hit is not None else 0
        return new_blocks + extra <= self.free_blocks

    def acquire(self, hashes: Sequence[int]) -> None:
        """Take a reference on cached blocks (a prefix hit)."""
        refs, evictable = self._refs, self._evictable
        for h in hashes:
            count = refs.get(h)
            if count is not None:
                refs[h] = count + 1
            else:
                del evictable[h]
                refs[h] = 1

    def allocate(self, new_blocks: int) -> None:
        """Take ``new_blocks`` fresh unhashed blocks, evicting LRU cached ones if needed."""
        if new_blocks <= 0:
            return
        if new_blocks > self.free_blocks:
            raise KVCacheFullError(f"{new_blocks} blocks requested, {self.free_blocks} free")
        empty = self.free_blocks - len(self._evictable)
        while empty < new_blocks:
            self._evictable.popitem(last=False)
            self.evictions += 1
            empty += 1
        self._anon += new_blocks

    def promote(self, hashes: Sequence[int]) -> None:
        """Give hashes to just-filled blocks (one unhashed block each) so others can hit them.

        If the hash is already cached the request shares that block and its own copy goes
        back to the free pool.
        """
        if not self.enable_prefix_caching:
            return
        refs, evictable = self._refs, self._evictable
        for h in hashes:
            self._anon -= 1
            count = refs.get(h)
            if count is not None:
                refs[h] = count + 1
            else:
                if h in evictable:
                    del evictable[h]
                refs[h] = 1

    def release(self, hashes: Sequence[int], anon_blocks: int) -> None:
        """Drop a request's references; its hashed blocks stay cached until evicted.

        Blocks are freed tail first, as vLLM does, so a prompt's last blocks are evicted
        before its first ones (the shared beginning survives longest).
        """
        refs, evictable = self._refs, self._evictable
        self._anon -= anon_blocks
        for h in reversed(hashes):
            count = refs[h] - 1
            if count:
                refs[h] = count
            else:
                del refs[h]
                evictable[h] = None

    def reset_prefix_cache(self) -> None:
        """Forget every evictable cached block (vLLM's ``/reset_prefix_cache``)."""
        self._evictable.clear()
