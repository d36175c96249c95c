"""User-defined profiles: a pipeline described in configuration, checked field by field.

``profile_from_spec(name, spec, ...)`` reads one mapping (from YAML or JSON)::

    {"filters": [{"type": "sample", "above": 32, "d": 4}],
     "scorers": [{"type": "queue", "weight": 1.0}, {"type": "kv", "weight": 2.0}],
     "picker": {"type": "argmin"}}

Each plugin type takes its own parameters (the fields of its config dataclass; ``weight``
for scorers); ``stale_after_s`` and ``block_chars`` default to the router's. Anything
unknown or mistyped is one ``ProfileError`` naming the profile, the plugin and the field.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from typing import Any, Final

from eagle_eye.errors import EagleEyeError
from eagle_eye.route.policies.base import Filter, Picker, Policy, Scorer
from eagle_eye.route.policies.config import PolicyConfig
from eagle_eye.route.policies.filters import PrefixGate, PrefixGateConfig, Sample, SampleConfig
from eagle_eye.route.policies.pickers import (
    ArgMin,
    ConsistentHash,
    ConsistentHashConfig,
    RoundRobin,
    Uniform,
)
from eagle_eye.route.policies.profiles import Profile
from eagle_eye.route.policies.scorers import (
    BlockConfig,
    Freshness,
    Inflight,
    Kv,
    KvFull,
    KvFullConfig,
    Load,
    NewPrefill,
    PendingPrefill,
    PrefixDepth,
    Queue,
    Running,
)
from eagle_eye.route.prefix import PrefixIndex


class ProfileError(EagleEyeError, ValueError):
    """A profile in configuration is invalid; the message says where and how to fix it."""


# type -> (config dataclass or None, constructor)
_FILTERS: Final[dict[str, tuple[Any, Callable[[Any], Filter]]]] = {
    "sample": (SampleConfig, Sample),
    "prefix_gate": (PrefixGateConfig, PrefixGate),
}
_SCORERS: Final[dict[str, tuple[Any, Callable[[Any], Scorer]]]] = {
    "queue": (Freshness, Queue),
    "running": (Freshness, Running),
    "load": (Freshness, Load),
    "kv": (Freshness, Kv),
    "kv_full": (KvFullConfig, KvFull),
    "new_prefill": (BlockConfig, NewPrefill),
    "inflight": (None, lambda _: Inflight()),
    "pending_prefill": (None, lambda _: PendingPrefill()),
    "prefix_depth": (None, lambda _: PrefixDepth()),
}
_PICKERS: Final = ("argmin", "round_robin", "random", "consistent_hash")
PLUGINS: Final = {"filters": sorted(_FILTERS), "scorers": sorted(_SCORERS), "pickers": _PICKERS}
"""Every plugin type a profile may name, by stage."""


def parse_profiles(text: str, source: str) -> dict[str, Mapping[str, Any]]:
    """The ``profiles:`` mapping of a YAML (or JSON) document; ``source`` names it in
    errors. An empty document defines no profiles."""
    import yaml

    try:
        doc = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise ProfileError(f"{source}: not valid YAML or JSON: {exc}") from None
    if doc is None:
        return {}
    if not isinstance(doc, Mapping) or set(doc) != {"profiles"}:
        raise ProfileError(f"{source}: expected one top-level key 'profiles: {{NAME: {{...}}}}'")
    profiles = doc["profiles"] or {}
    if not isinstance(profiles, Mapping) or not all(isinstance(k, str) for k in profiles):
        raise ProfileError(f"{source}: 'profiles' must map names to pipeline specs")
    return dict(profiles)


def profile_from_spec(
    name: str,
    spec: Mapping[str, Any],
    *,
    defaults: PolicyConfig,
    index: PrefixIndex,
    fallback: Policy,
) -> Profile:
    """Build the profile ``name`` described by ``spec``; ``fallback`` serves requests
    without a session key when the picker is ``consistent_hash``."""
    where = f"profile {name!r}"
    if not isinstance(spec, Mapping):
        raise ProfileError(f"{where}: expected a mapping with filters, scorers and picker")
    _no_extra(where, spec, {"filters", "scorers", "picker"})
    base = {"stale_after_s": defaults.stale_after_s, "block_chars": defaults.block_chars}
    filters = [
        _plugin(f"{where} filter {i}", item, _FILTERS, base)
        for i, item in enumerate(_list(where, spec, "filters"))
    ]
    scorers: list[tuple[float, Scorer]] = []
    for i, item in enumerate(_list(where, spec, "scorers")):
        at = f"{where} scorer {i}"
        params = dict(_mapping(at, item))
        weight = params.pop("weight", 1.0)
        if isinstance(weight, bool) or not isinstance(weight, (int, float)):
            raise ProfileError(f"{at}: 'weight' must be a number, got {weight!r}")
        scorers.append((float(weight), _plugin(at, params, _SCORERS, base)))
    picker = _picker(where, spec.get("picker", {"type": "argmin"}), fallback)
    return Profile(name, filters=filters, scorers=scorers, picker=picker, index=index)


def _picker(where: str, item: Any, fallback: Policy) -> Picker:
    at = f"{where} picker"
    params = dict(_mapping(at, item))
    kind = params.pop("type", None)
    if kind == "consistent_hash":
        return ConsistentHash(_config(at, ConsistentHashConfig, params), fallback)
    _no_extra(at, params, set())
    if kind == "argmin":
        return ArgMin()
    if kind == "round_robin":
        return RoundRobin()
    if kind == "random":
        return Uniform()
    raise ProfileError(f"{at}: unknown type {kind!r}; choose from {', '.join(_PICKERS)}")


def _plugin(
    at: str,
    item: Any,
    table: Mapping[str, tuple[Any, Callable[[Any], Any]]],
    base: Mapping[str, Any],
) -> Any:
    params = dict(_mapping(at, item))
    kind = params.pop("type", None)
    entry = table.get(kind) if isinstance(kind, str) else None
    if entry is None:
        raise ProfileError(f"{at}: unknown type {kind!r}; choose from {', '.join(sorted(table))}")
    config_type, make = entry
    if config_type is None:
        _no_extra(f"{at} ({kind})", params, set())
        return make(None)
    names = {f.name for f in dataclasses.fields(config_type)}
    merged = {k: v for k, v in base.items() if k in names} | params
    return make(_config(f"{at} ({kind})", config_type, merged))


def _config(at: str, config_type: Any, params: Mapping[str, Any]) -> Any:
    fields = {f.name: f for f in dataclasses.fields(config_type)}
    _no_extra(at, params, set(fields))
    for key, value in params.items():
        expected = fields[key].type
        ok = isinstance(value, bool) if expected == "bool" else _is_number(value, expected)
        if not ok:
            raise ProfileError(f"{at}: {key!r} must be {expected}, got {value!r}")
    try:
        return config_type(**params)
    except (TypeError, ValueError) as exc:  # a required field left out, a bad value
        raise ProfileError(f"{at}: {exc}") from None


def _is_number(value: Any, expected: Any) -> bool:
    if isinstance(value, bool):
        return False
    if expected == "int":
        return isinstance(value, int) and value >= 0
    return isinstance(value, (int, float)) and value >= 0


def _list(where: str, spec: Mapping[str, Any], key: str) -> list[Any]:
    value = spec.get(key, [])
    if not isinstance(value, list):
        raise ProfileError(f"{where}: {key!r} must be a list")
    return value


def _mapping(at: str, item: Any) -> Mapping[str, Any]:
    if not isinstance(item, Mapping):
        raise ProfileError(f"{at}: expected a mapping like {{type: ..., ...}}, got {item!r}")
    return item


def _no_extra(at: str, params: Mapping[str, Any], allowed: set[str]) -> None:
    extra = sorted(set(params) - allowed)
    if extra:
        choices = ", ".join(sorted(allowed)) or "none"
        raise ProfileError(f"{at}: unknown parameter(s) {', '.join(extra)} (allowed: {choices})")
