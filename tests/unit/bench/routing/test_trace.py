"""Trace parsing, shaping and prompt synthesis (pure)."""

from __future__ import annotations

import itertools
import json
from pathlib import Path

import pytest

from eagle_eye.bench.routing.trace import (
    MOONCAKE_BLOCK_TOKENS,
    TraceError,
    TraceRequest,
    arrival_rate_rps,
    cap_duration,
    dump_lines,
    load_trace,
    parse_lines,
    prompt_text,
    prompt_text_head,
    rebase,
    scale_rate,
    span_s,
    trace_stats,
)
from eagle_eye.sim.tokens import text_block_hashes, text_token_count

SLICE = Path(__file__).parent / "data" / "mooncake_slice.jsonl"


def _req(t: float, ids: tuple[int, ...], tokens: int | None = None, out: int = 5) -> TraceRequest:
    n = tokens if tokens is not None else MOONCAKE_BLOCK_TOKENS * len(ids)
    return TraceRequest(arrival_s=t, input_tokens=n, output_tokens=out, hash_ids=ids)


def test_slice_loads_sorted_with_times_in_seconds() -> None:
    requests = load_trace(SLICE)
    assert len(requests) == 24
    first = json.loads(SLICE.read_text().splitlines()[0])
    assert requests[0].arrival_s == pytest.approx(first["timestamp"] / 1000)
    assert requests[0].hash_ids == tuple(first["hash_ids"])
    assert all(a.arrival_s <= b.arrival_s for a, b in itertools.pairwise(requests))


def test_limit_stops_reading_early() -> None:
    assert len(load_trace(SLICE, limit=5)) == 5


@pytest.mark.parametrize(
    ("line", "reason"),
    [
        ("not json", "not JSON"),
        ("[1, 2]", "JSON object"),
        ('{"timestamp": -1, "input_length": 1, "output_length": 1, "hash_ids": []}', "timestamp"),
        ('{"timestamp": 0, "input_length": 0, "output_length": 1, "hash_ids": []}', "input_length"),
        (
            '{"timestamp": 0, "input_length": 1, "output_length": 1.5, "hash_ids": []}',
            "output_length",
        ),
        ('{"timestamp": 0, "input_length": 1, "output_length": 1, "hash_ids": [-3]}', "hash_ids"),
    ],
)
def test_bad_lines_raise_trace_error_with_line_number(line: str, reason: str) -> None:
    good = '{"timestamp": 0, "input_length": 1, "output_length": 1, "hash_ids": [1]}'
    with pytest.raises(TraceError) as info:
        parse_lines([good, "", line])
    assert info.value.line == 3
    assert reason in str(info.value)


def test_dump_and_parse_round_trip() -> None:
    requests = load_trace(SLICE)
    assert parse_lines(dump_lines(requests)) == requests


def test_scale_rate_divides_gaps_and_keeps_everything_else() -> None:
    requests = [_req(10.0, (1,)), _req(12.0, (1, 2)), _req(16.0, (3,))]
    scaled = scale_rate(requests, 2.0)
    assert [r.arrival_s for r in scaled] == [0.0, 1.0, 3.0]
    assert [r.hash_ids for r in scaled] == [r.hash_ids for r in requests]
    assert arrival_rate_rps(scaled) == pytest.approx(2 * arrival_rate_rps(requests))
    with pytest.raises(ValueError):
        scale_rate(requests, 0.0)


def test_cap_duration_keeps_the_first_seconds_from_the_first_arrival() -> None:
    requests = [_req(5.0, (1,)), _req(6.0, (2,)), _req(9.0, (3,))]
    assert [r.arrival_s for r in cap_duration(requests, 1.5)] == [0.0, 1.0]
    assert len(cap_duration(requests, None)) == 3
    assert rebase([]) == []
    assert span_s(requests) == 4.0


def test_stats_count_chained_block_reuse() -> None:
    # Block 1 at position 0 is reused once; (1, 2) and (9, 2) differ at position 1.
    requests = [_req(0, (1, 2)), _req(1, (1, 3)), _req(2, (9, 2))]
    stats = trace_stats(requests)
    assert stats.requests == 3
    assert stats.block_reuse == pytest.approx(1 / 6)
    assert stats.mean_input_tokens == 1024


def test_prompt_text_is_four_bytes_per_token_for_the_simulator() -> None:
    request = _req(0, (4, 5, 6), tokens=1100)
    text = prompt_text(request)
    assert len(text.encode()) == 4 * 1100
    assert text_token_count(text) == 1100


def test_shared_hash_ids_give_shared_text_blocks_and_distinct_ids_do_not() -> None:
    a = prompt_text(_req(0, (0, 7, 8)))
    b = prompt_text(_req(0, (0, 7, 9)))
    c = prompt_text(_req(0, (1, 7, 8)))
    chunk = 4 * MOONCAKE_BLOCK_TOKENS
    assert a[: 2 * chunk] == b[: 2 * chunk]
    assert a[2 * chunk : 3 * chunk] != b[2 * chunk : 3 * chunk]
    assert a[:chunk] != c[:chunk]
    # The simulator's 16-token KV blocks see exactly the trace's sharing.
    ha, hb, hc = (text_block_hashes(t, 16) for t in (a, b, c))
    per_id = MOONCAKE_BLOCK_TOKENS // 16
    assert ha[: 2 * per_id] == hb[: 2 * per_id]
    assert ha[2 * per_id] != hb[2 * per_id]
    assert not set(ha) & set(hc)


def test_prompt_text_head_equals_the_prefix_of_the_full_text() -> None:
    for tokens in (1, 511, 512, 513, 3000):
        ids = tuple(range(20, 20 + -(-tokens // 512)))
        request = _req(0, ids, tokens=tokens)
        for chars in (10, 2048, 32768):
            assert prompt_text_head(request, chars) == prompt_text(request)[:chars]


def test_prompt_without_enough_hash_ids_is_padded_to_its_length() -> None:
    request = _req(0, (1,), tokens=700)
    assert text_token_count(prompt_text(request)) == 700
