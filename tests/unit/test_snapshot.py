"""Wire format v1: round trips, every rejection rule, and agreement with the JSON Schema."""

from __future__ import annotations

import json
import random
from importlib import resources
from typing import Any

import jsonschema
import pytest

from eagle_eye.snapshot import (
    MAX_PAYLOAD_BYTES,
    EngineState,
    Snapshot,
    SnapshotError,
    decode,
    encode,
    to_dict,
)


def _schema() -> dict[str, Any]:
    text = resources.files("eagle_eye").joinpath("schema/snapshot-v1.json").read_text()
    loaded: dict[str, Any] = json.loads(text)
    return loaded


def _full() -> Snapshot:
    return Snapshot(
        instance_id="vllm-0",
        model="llama",
        engine="vllm",
        seq=7,
        timestamp_s=1_700_000_000.5,
        state=EngineState.READY,
        endpoint="http://10.0.0.5:8000",
        engine_version="0.32.0",
        dp_rank=1,
        lora_adapters=("sql-lora",),
        running=3,
        waiting=2,
        kv_usage=0.25,
        kv_capacity_tokens=16384,
        prefix_cache_queries_total=100,
        prefix_cache_hits_total=40,
        preemptions_total=1,
        step_prompt_tokens=64,
        step_generation_tokens=3,
        ttft_recent_s=0.05,
        itl_recent_s=0.01,
        generation_tokens_per_s=120.0,
        step=99,
    )


def _valid_dict() -> dict[str, Any]:
    return to_dict(_full())


def test_round_trip_keeps_every_field() -> None:
    assert decode(encode(_full())) == _full()


def test_minimal_message_decodes_with_defaults() -> None:
    snap = decode(
        b'{"v":"1.0","instance_id":"a","model":"m","engine":"sim","seq":0,"timestamp_s":1}'
    )
    assert snap.state is EngineState.READY
    assert (snap.running, snap.waiting, snap.kv_usage) == (0, 0, None)


def test_absent_optional_fields_are_left_out_of_the_json() -> None:
    snap = Snapshot(instance_id="a", model="m", engine="sim", seq=1, timestamp_s=1.0)
    assert "kv_usage" not in json.loads(encode(snap))


def test_newer_minor_version_and_unknown_fields_are_accepted_and_kept() -> None:
    obj = _valid_dict() | {"v": "1.9", "future_field": [1, 2]}
    snap = decode(json.dumps(obj))
    assert snap.extra == {"future_field": [1, 2]}
    assert json.loads(encode(snap))["future_field"] == [1, 2]


def test_seed_subscriber_style_json_loads_reads_the_message() -> None:
    data = json.loads(encode(_full()).decode("utf-8"))
    assert data["waiting"] == 2 and data["kv_usage"] == 0.25 and data["running"] == 3


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"v": "2.0"}, "v"),
        ({"v": 1}, "v"),
        ({"running": -1}, "running"),
        ({"waiting": 1.5}, "waiting"),
        ({"waiting": True}, "waiting"),
        ({"kv_usage": 1.01}, "kv_usage"),
        ({"kv_usage": -0.1}, "kv_usage"),
        ({"ttft_recent_s": "fast"}, "ttft_recent_s"),
        ({"seq": -1}, "seq"),
        ({"timestamp_s": -5}, "timestamp_s"),
        ({"state": "sleeping"}, "state"),
        ({"instance_id": ""}, "instance_id"),
        ({"instance_id": "x" * 257}, "instance_id"),
        ({"model": 3}, "model"),
        ({"endpoint": "h" * 2049}, "endpoint"),
        ({"lora_adapters": "a"}, "lora_adapters"),
        ({"lora_adapters": [""]}, "lora_adapters"),
    ],
)
def test_invalid_fields_are_rejected_by_code_and_schema(change: dict[str, Any], field: str) -> None:
    obj = _valid_dict() | change
    with pytest.raises(SnapshotError) as info:
        decode(json.dumps(obj))
    assert info.value.field == field
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(obj, _schema())


@pytest.mark.parametrize("required", ["v", "instance_id", "model", "engine", "seq", "timestamp_s"])
def test_missing_required_field_is_rejected_by_code_and_schema(required: str) -> None:
    obj = _valid_dict()
    del obj[required]
    with pytest.raises(SnapshotError) as info:
        decode(json.dumps(obj))
    assert info.value.field == required
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(obj, _schema())


@pytest.mark.parametrize("token", ["NaN", "Infinity", "-Infinity"])
def test_non_finite_numbers_are_rejected(token: str) -> None:
    raw = json.dumps(_valid_dict()).replace('"kv_usage": 0.25', f'"kv_usage": {token}')
    with pytest.raises(SnapshotError, match="non-finite"):
        decode(raw)


def test_encode_refuses_nan() -> None:
    with pytest.raises(ValueError):
        encode(Snapshot(instance_id="a", model="m", engine="e", seq=0, timestamp_s=float("nan")))


@pytest.mark.parametrize("data", [b"", b"not json", b"[1,2]", b'"x"', b"\xff\xfe", b"{"])
def test_garbage_is_a_snapshot_error_not_a_crash(data: bytes) -> None:
    with pytest.raises(SnapshotError):
        decode(data)


def test_oversize_payload_is_rejected_before_parsing() -> None:
    obj = _valid_dict() | {"padding": "x" * MAX_PAYLOAD_BYTES}
    with pytest.raises(SnapshotError) as info:
        decode(json.dumps(obj))
    assert info.value.field == "payload"


def test_schema_lists_exactly_the_fields_the_code_writes() -> None:
    schema_fields = set(_schema()["properties"])
    assert schema_fields == set(_valid_dict())


def test_random_valid_snapshots_satisfy_the_schema() -> None:
    rng = random.Random(1234)
    schema = _schema()
    for i in range(200):
        snap = Snapshot(
            instance_id=f"i{rng.randrange(1000)}",
            model=rng.choice(["a", "b/c"]),
            engine=rng.choice(["vllm", "sglang", "sim"]),
            seq=i,
            timestamp_s=rng.uniform(0, 2e9),
            state=rng.choice(list(EngineState)),
            running=rng.randrange(100),
            waiting=rng.randrange(100),
            kv_usage=rng.choice([None, rng.random(), 0.0, 1.0]),
            ttft_recent_s=rng.choice([None, rng.uniform(0, 10)]),
            step=rng.choice([None, rng.randrange(10**9)]),
        )
        obj = json.loads(encode(snap))
        jsonschema.validate(obj, schema)
        assert decode(encode(snap)) == snap
