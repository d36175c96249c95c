"""Wire format v1: the one message Eagle Eye engines publish, and its validation.

A ``Snapshot`` is what one engine (one data-parallel rank of one server) looks like after
a step. It travels as a compact JSON object so that any NATS client in any language can
read it; the seed's ``RouterSubscriber`` does nothing more than ``json.loads`` on it.

Everything here is pure: no I/O, no clocks, no logging. ``encode`` and ``decode`` are the
only ways in and out, and ``decode`` never trusts its input: NaN/inf, negative counts,
ratios outside 0-1, oversize strings or payloads and unknown major versions raise
``SnapshotError`` naming the field, so a consumer can count and drop the message.

Compatibility rule: the ``v`` field is ``"MAJOR.MINOR"``. Consumers accept any minor
version of a major they know and ignore fields they do not know, so producers may add
optional fields in a minor release; removing or changing the meaning of a field needs a
new major. ``docs/wire-format.md`` and ``schema/snapshot-v1.json`` describe the same
format for non-Python consumers.
"""

from __future__ import annotations

import json
import math
import sys
from dataclasses import dataclass, field
from enum import Enum
from typing import Any, Final

from eagle_eye.errors import EagleEyeError

WIRE_MAJOR: Final = 1
WIRE_MINOR: Final = 0
WIRE_VERSION: Final = f"{WIRE_MAJOR}.{WIRE_MINOR}"

MAX_PAYLOAD_BYTES: Final = 64 * 1024
"""Upper bound on one encoded snapshot; a real one is about 500 bytes."""
MAX_ID_CHARS: Final = 256
MAX_URL_CHARS: Final = 2048
MAX_NAME_CHARS: Final = 512
MAX_ADAPTERS: Final = 256


class EngineState(str, Enum):
    """Lifecycle of an engine as the router needs to know it.

    Only ``ready`` instances get new requests; ``draining`` finishes what it has,
    ``stopping`` is the last message an instance sends, ``unreachable`` is what an agent
    reports when the engine it watches stops answering.
    """

    LOADING = "loading"
    READY = "ready"
    DRAINING = "draining"
    STOPPING = "stopping"
    UNREACHABLE = "unreachable"


class SnapshotError(EagleEyeError, ValueError):
    """A message that is not a valid v1 snapshot; ``field`` names the culprit."""

    def __init__(self, field_name: str, reason: str) -> None:
        super().__init__(f"{field_name}: {reason}")
        self.field = field_name
        self.reason = reason


@dataclass(frozen=True, slots=True, kw_only=True)
class Snapshot:
    """One engine rank's state after a step. Optional fields are absent when unknown."""

    instance_id: str
    """Stable name of the engine server (pod name, host-port); shared by its dp ranks."""
    model: str
    """Served model name, as clients put it in ``"model"``."""
    engine: str
    """Engine kind: ``vllm``, ``sglang``, ``tgi``, ``llamacpp``, ``ray-serve``, ``sim``."""
    seq: int
    """Per (instance_id, dp_rank) sequence number, +1 per message; resets on restart."""
    timestamp_s: float
    """Publisher wall clock (Unix seconds) when the state was sampled."""
    state: EngineState = EngineState.READY
    endpoint: str | None = None
    """Base URL a router should call, e.g. ``http://10.0.0.5:8000``."""
    engine_version: str | None = None
    dp_rank: int = 0
    lora_adapters: tuple[str, ...] = ()
    """LoRA adapters this instance can serve (besides the base ``model``)."""
    running: int = 0
    """Requests being processed (``vllm:num_requests_running``)."""
    waiting: int = 0
    """Requests queued (``vllm:num_requests_waiting``)."""
    kv_usage: float | None = None
    """Fraction 0-1 of the KV cache in use (``vllm:kv_cache_usage_perc``)."""
    kv_capacity_tokens: int | None = None
    """KV-cache capacity in tokens (blocks x block size)."""
    prefix_cache_queries_total: int | None = None
    """Cumulative prompt tokens looked up in the prefix cache."""
    prefix_cache_hits_total: int | None = None
    """Cumulative prompt tokens found in the prefix cache."""
    preemptions_total: int | None = None
    step_prompt_tokens: int | None = None
    """Prompt tokens since the previous message (cache hits included, as vLLM counts them)."""
    step_generation_tokens: int | None = None
    """Tokens generated in the last step(s) since the previous message."""
    ttft_recent_s: float | None = None
    """Recent time to first token (exponentially weighted mean), seconds."""
    itl_recent_s: float | None = None
    """Recent inter-token latency (exponentially weighted mean), seconds."""
    generation_tokens_per_s: float | None = None
    """Recent generation throughput."""
    step: int | None = None
    """Engine step counter, when the engine reports one."""
    extra: dict[str, Any] = field(default_factory=dict)
    """Unknown fields of a newer minor version, kept so nothing is lost on relay."""


class Part(str, Enum):
    """Where a field's value comes from, which tells producers how to fill it."""

    HEADER = "header"
    """Set per message by the publisher (``seq``, ``timestamp_s``)."""
    IDENTITY = "identity"
    """Who publishes; fixed for an engine rank (``InstanceIdentity`` has these names)."""
    SAMPLE = "sample"
    """The rank's state at one instant (a publisher's ``Sample`` has these names)."""
    STEP = "step"
    """Derived by the publisher from consecutive samples (per-message deltas, rates)."""


@dataclass(frozen=True, slots=True)
class Field:
    """One field of the wire format: the single list every producer and consumer reads."""

    name: str
    kind: str
    """``string``, ``count`` (int >= 0), ``ratio`` (float 0-1), ``nonneg`` (finite
    float >= 0), ``state``, ``names`` (list of strings), or ``version``."""
    part: Part
    max_chars: int = 0
    """Longest accepted value, for strings."""
    required: bool = False
    metric: tuple[str, str, str] | None = None
    """How ``eagle-eye exporter`` exposes it: (Prometheus name, help, ``gauge`` or
    ``counter``); counters get ``_total`` appended by the client library."""


FIELDS: Final[tuple[Field, ...]] = (
    Field("instance_id", "string", Part.IDENTITY, MAX_ID_CHARS, required=True),
    Field("model", "string", Part.IDENTITY, MAX_NAME_CHARS, required=True),
    Field("engine", "string", Part.IDENTITY, 64, required=True),
    Field("seq", "count", Part.HEADER, required=True,
          metric=("eagle_eye_snapshot_seq", "Sequence number of the newest snapshot.", "gauge")),
    Field("timestamp_s", "nonneg", Part.HEADER, required=True,
          metric=("eagle_eye_snapshot_timestamp_seconds",
                  "Publisher clock (Unix seconds) of the newest snapshot.", "gauge")),
    Field("state", "state", Part.SAMPLE),
    Field("endpoint", "string", Part.IDENTITY, MAX_URL_CHARS),
    Field("engine_version", "string", Part.IDENTITY, 128),
    Field("dp_rank", "count", Part.IDENTITY),
    Field("lora_adapters", "names", Part.IDENTITY),
    Field("running", "count", Part.SAMPLE,
          metric=("eagle_eye_requests_running", "Requests being processed.", "gauge")),
    Field("waiting", "count", Part.SAMPLE,
          metric=("eagle_eye_requests_waiting", "Requests queued.", "gauge")),
    Field("kv_usage", "ratio", Part.SAMPLE,
          metric=("eagle_eye_kv_cache_usage_ratio", "Fraction 0-1 of the KV cache in use.",
                  "gauge")),
    Field("kv_capacity_tokens", "count", Part.IDENTITY,
          metric=("eagle_eye_kv_cache_capacity_tokens", "KV-cache capacity in tokens.", "gauge")),
    Field("prefix_cache_queries_total", "count", Part.SAMPLE,
          metric=("eagle_eye_prefix_cache_queries_tokens",
                  "Prompt tokens looked up in the prefix cache.", "counter")),
    Field("prefix_cache_hits_total", "count", Part.SAMPLE,
          metric=("eagle_eye_prefix_cache_hits_tokens",
                  "Prompt tokens found in the prefix cache.", "counter")),
    Field("preemptions_total", "count", Part.SAMPLE,
          metric=("eagle_eye_preemptions", "Requests preempted.", "counter")),
    Field("step_prompt_tokens", "count", Part.STEP),
    Field("step_generation_tokens", "count", Part.STEP),
    Field("ttft_recent_s", "nonneg", Part.SAMPLE,
          metric=("eagle_eye_ttft_recent_seconds", "Recent time to first token (EWMA).",
                  "gauge")),
    Field("itl_recent_s", "nonneg", Part.SAMPLE,
          metric=("eagle_eye_itl_recent_seconds", "Recent inter-token latency (EWMA).",
                  "gauge")),
    Field("generation_tokens_per_s", "nonneg", Part.STEP,
          metric=("eagle_eye_generation_tokens_per_second", "Recent generation throughput.",
                  "gauge")),
    Field("step", "count", Part.SAMPLE),
)  # fmt: skip
"""Every field of a v1 snapshot, in wire order (``v`` aside). A new optional field is one
row here plus one attribute on ``Snapshot``; encode, decode, the publisher, the exporter
and the offline benchmark all derive what they need from this table."""


def field_names(part: Part) -> tuple[str, ...]:
    """Names of the fields a producer fills from ``part``, in wire order."""
    return tuple(f.name for f in FIELDS if f.part is part)


_ALWAYS_SENT: Final = ("running", "waiting", "dp_rank")
"""Optional fields ``to_dict`` writes even at their default (the seed's consumer reads
them without checking)."""
_NUMERIC_KINDS: Final = {
    f.name: f.kind for f in FIELDS if f.kind in ("count", "ratio", "nonneg") and not f.required
}
"""Optional numeric fields, validated in one pass by ``from_dict``."""
_STRING_FIELDS: Final = tuple(
    (f.name, f.max_chars, f.required) for f in FIELDS if f.kind == "string"
)
_OPTIONAL: Final = tuple(
    f.name
    for f in FIELDS
    if not f.required and f.kind not in ("state", "names") and f.name not in _ALWAYS_SENT
)
"""Fields ``to_dict`` leaves out when None."""
_KNOWN_KEYS: Final = frozenset({"v"} | {f.name for f in FIELDS})
_STATES: Final = {s.value: s for s in EngineState}
_MAX_FLOAT: Final = sys.float_info.max
_UPPER_BOUND: Final = {"ratio": 1.0, "nonneg": _MAX_FLOAT}
_MAJOR_PREFIX: Final = f"{WIRE_MAJOR}."


def to_dict(snapshot: Snapshot) -> dict[str, Any]:
    """The JSON object for ``snapshot``: absent optional fields are left out."""
    out: dict[str, Any] = dict(snapshot.extra)
    out.update(
        v=WIRE_VERSION,
        instance_id=snapshot.instance_id,
        model=snapshot.model,
        engine=snapshot.engine,
        seq=snapshot.seq,
        timestamp_s=snapshot.timestamp_s,
        state=snapshot.state.value,
        running=snapshot.running,
        waiting=snapshot.waiting,
        dp_rank=snapshot.dp_rank,
    )
    if snapshot.lora_adapters:
        out["lora_adapters"] = list(snapshot.lora_adapters)
    for name in _OPTIONAL:
        value = getattr(snapshot, name)
        if value is not None:
            out[name] = value
    return out


def encode(snapshot: Snapshot) -> bytes:
    """Serialise to compact UTF-8 JSON. Raises ``SnapshotError`` if it would not decode."""
    data = json.dumps(to_dict(snapshot), separators=(",", ":"), allow_nan=False).encode()
    if len(data) > MAX_PAYLOAD_BYTES:
        raise SnapshotError("payload", f"{len(data)} bytes exceeds {MAX_PAYLOAD_BYTES}")
    return data


def decode(data: bytes | str) -> Snapshot:
    """Parse and validate one message. Raises ``SnapshotError`` on anything invalid."""
    if len(data) > MAX_PAYLOAD_BYTES:
        raise SnapshotError("payload", f"{len(data)} bytes exceeds {MAX_PAYLOAD_BYTES}")
    try:
        obj = _DECODER.decode(data.decode("utf-8") if isinstance(data, bytes) else data)
    except SnapshotError:
        raise
    except (ValueError, UnicodeDecodeError) as exc:
        raise SnapshotError("payload", f"not JSON: {exc}") from exc
    if not isinstance(obj, dict):
        raise SnapshotError("payload", f"expected a JSON object, got {type(obj).__name__}")
    return from_dict(obj)


def from_dict(obj: dict[str, Any]) -> Snapshot:
    """Validate an already-parsed JSON object (see ``decode``)."""
    version = obj.get("v")
    if not isinstance(version, str):
        raise SnapshotError("v", "missing or not a string")
    if not version.startswith(_MAJOR_PREFIX):
        raise SnapshotError("v", f"unsupported major version {version!r} (this reader: 1.x)")

    kwargs = _strings(obj)

    seq = obj.get("seq")
    kwargs["seq"] = seq if type(seq) is int and seq >= 0 else _check_count("seq", seq)
    ts: Any = obj.get("timestamp_s")
    if type(ts) is not float or not 0.0 <= ts <= _MAX_FLOAT:
        if type(ts) is not int or ts < 0:
            raise SnapshotError("timestamp_s", f"expected finite seconds >= 0, got {ts!r}")
        ts = float(ts)
    kwargs["timestamp_s"] = ts

    state = obj.get("state", "ready")
    try:
        kwargs["state"] = _STATES[state]
    except (KeyError, TypeError):
        raise SnapshotError("state", f"unknown state {state!r}") from None

    # One pass over what is present (the router ingests tens of thousands a second):
    # the common valid cases are checked inline, everything else by _check_number.
    for name, value in obj.items():
        kind = _NUMERIC_KINDS.get(name)
        if kind is None or value is None:
            continue
        if kind == "count":
            if type(value) is not int or value < 0:
                value = _check_count(name, value)
        elif type(value) is not float or not 0.0 <= value <= _UPPER_BOUND[kind]:
            value = _check_number(name, kind, value)
        kwargs[name] = value

    adapters = obj.get("lora_adapters")
    if adapters is not None:
        if not isinstance(adapters, list) or len(adapters) > MAX_ADAPTERS:
            raise SnapshotError("lora_adapters", f"expected a list of <= {MAX_ADAPTERS} names")
        for item in adapters:
            if not isinstance(item, str) or not item or len(item) > MAX_NAME_CHARS:
                raise SnapshotError("lora_adapters", f"invalid adapter name {item!r}")
        kwargs["lora_adapters"] = tuple(adapters)

    unknown = obj.keys() - _KNOWN_KEYS
    if unknown:
        kwargs["extra"] = {k: obj[k] for k in unknown}
    return Snapshot(**kwargs)


def _strings(obj: dict[str, Any]) -> dict[str, Any]:
    """The string fields of ``obj``, checked for presence, type and length."""
    out: dict[str, Any] = {}
    for name, max_chars, required in _STRING_FIELDS:
        value = obj.get(name)
        if value is None:
            if required:
                raise SnapshotError(name, "missing")
            continue
        if not isinstance(value, str):
            raise SnapshotError(name, f"expected a string, got {type(value).__name__}")
        if len(value) > max_chars:
            raise SnapshotError(name, f"{len(value)} characters exceeds {max_chars}")
        if required and not value:
            raise SnapshotError(name, "empty")
        out[name] = value
    return out


def _check_number(name: str, kind: str, value: Any) -> int | float:
    if kind == "count":
        return _check_count(name, value)
    if type(value) not in (int, float) or not math.isfinite(value):
        raise SnapshotError(name, f"expected a finite number, got {value!r}")
    if value < 0:
        raise SnapshotError(name, f"must be >= 0, got {value}")
    if kind == "ratio" and value > 1:
        raise SnapshotError(name, f"must be within 0-1, got {value}")
    return float(value)


def _check_count(name: str, value: Any) -> int:
    """A non-negative integer; ``3.0`` counts as 3 (JSON Schema's notion of integer)."""
    if type(value) is float and value.is_integer():
        value = int(value)
    if type(value) is not int:
        raise SnapshotError(name, f"expected an integer, got {value!r}")
    if value < 0:
        raise SnapshotError(name, f"must be >= 0, got {value}")
    return value


def _reject_constant(token: str) -> Any:
    raise SnapshotError("payload", f"non-finite number {token} is not allowed")


_DECODER: Final = json.JSONDecoder(parse_constant=_reject_constant)
