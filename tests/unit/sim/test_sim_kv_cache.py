"""The block pool: capacity is never exceeded, cached blocks are shared and evicted LRU."""

from __future__ import annotations

import pytest

from eagle_eye.sim.kv_cache import KVCache, KVCacheFullError


def test_allocate_refuses_more_than_free_blocks() -> None:
    kv = KVCache(4, 16)
    kv.allocate(3)
    assert kv.free_blocks == 1
    assert not kv.can_allocate(2)
    with pytest.raises(KVCacheFullError):
        kv.allocate(2)
    assert kv.used_blocks == 3


def test_promoted_blocks_are_found_by_lookup_and_shared() -> None:
    kv = KVCache(8, 16)
    kv.allocate(3)
    kv.promote([11, 12])
    assert kv.lookup([11, 12, 13], 3).blocks == 2
    kv.acquire([11, 12])  # a second request shares them: no new blocks used
    assert kv.used_blocks == 3


def test_released_blocks_stay_cached_until_evicted_oldest_first() -> None:
    kv = KVCache(4, 16)
    kv.allocate(2)
    kv.promote([1, 2])
    kv.release([1, 2], 0)
    assert kv.usage == 0.0
    assert kv.cached_blocks == 2
    kv.allocate(2)  # two empty blocks remain: nothing evicted yet
    assert kv.lookup([1, 2], 2).blocks == 2
    kv.allocate(1)  # needs one evictable block: the tail block 2 was freed first
    assert kv.lookup([1], 1).blocks == 1
    assert not kv.contains(2)
    assert kv.evictions == 1


def test_hit_on_evictable_blocks_counts_against_free_space() -> None:
    kv = KVCache(3, 16)
    kv.allocate(2)
    kv.promote([1, 2])
    kv.release([1, 2], 0)
    kv.allocate(1)
    hit = kv.lookup([1, 2], 2)
    assert hit.evictable == 2
    assert kv.can_allocate(0, hit)
    assert not kv.can_allocate(1, hit)
