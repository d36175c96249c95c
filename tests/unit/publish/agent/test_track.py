"""Readings across scrapes -> samples: counters re-based, histogram means smoothed."""

from __future__ import annotations

import pytest

from eagle_eye.publish.agent.engines import RankKey, Reading
from eagle_eye.publish.agent.track import RankTracker
from eagle_eye.snapshot import EngineState

KEY = RankKey("m")


def test_token_counters_start_at_zero_and_add_increases() -> None:
    tracker = RankTracker()
    first = tracker.sample(Reading(key=KEY, prompt_tokens_total=1000), 1.0)
    second = tracker.sample(Reading(key=KEY, prompt_tokens_total=1030), 1.1)
    assert (first.prompt_tokens_total, second.prompt_tokens_total) == (0, 30)


def test_an_engine_restart_does_not_make_counters_go_backwards() -> None:
    tracker = RankTracker()
    tracker.sample(Reading(key=KEY, generation_tokens_total=500), 1.0)
    tracker.sample(Reading(key=KEY, generation_tokens_total=520), 1.1)
    after_restart = tracker.sample(Reading(key=KEY, generation_tokens_total=7), 1.2)
    assert after_restart.generation_tokens_total == 27


def test_engine_totals_pass_through_unchanged() -> None:
    reading = Reading(
        key=KEY, prefix_cache_queries_total=10, prefix_cache_hits_total=4, preemptions_total=1
    )
    sample = RankTracker().sample(reading, 5.0)
    assert (sample.prefix_cache_queries_total, sample.prefix_cache_hits_total) == (10, 4)
    assert sample.preemptions_total == 1
    assert sample.monotonic_s == 5.0
    assert sample.state is EngineState.READY


def test_recent_ttft_is_the_mean_of_what_finished_between_scrapes() -> None:
    tracker = RankTracker()
    assert (
        tracker.sample(Reading(key=KEY, ttft_sum_s=10.0, ttft_count=100), 1).ttft_recent_s is None
    )
    # two requests finished, 0.5 s of TTFT between them -> 0.25 s each
    sample = tracker.sample(Reading(key=KEY, ttft_sum_s=10.5, ttft_count=102), 2)
    assert sample.ttft_recent_s == pytest.approx(0.25)
    # nothing new: the recent value stays
    sample = tracker.sample(Reading(key=KEY, ttft_sum_s=10.5, ttft_count=102), 3)
    assert sample.ttft_recent_s == pytest.approx(0.25)
    # one more at 1.25 s, folded in with the plugin's smoothing (alpha 0.2)
    sample = tracker.sample(Reading(key=KEY, ttft_sum_s=11.75, ttft_count=103), 4)
    assert sample.ttft_recent_s == pytest.approx(0.25 + 0.2 * (1.25 - 0.25))


def test_missing_fields_stay_absent() -> None:
    sample = RankTracker().sample(Reading(key=KEY, running=2, waiting=1), 1.0)
    assert (sample.running, sample.waiting) == (2, 1)
    assert sample.kv_usage is None
    assert sample.prompt_tokens_total is None
    assert sample.itl_recent_s is None
