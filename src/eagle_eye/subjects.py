"""The NATS subject tree.

::

    eagle_eye.routing_metrics                       flat (default): every snapshot, as seed 000
    eagle_eye.routing_metrics.<model>.<instance>    hierarchical: one subject per instance rank
    eagle_eye.control.sync                          "re-send your latest snapshot now"

The flat default is exactly the seed's subject, so its ``RouterSubscriber`` works
unchanged. Large fleets switch publishers to hierarchical subjects so a consumer can
subscribe to one model (``eagle_eye.routing_metrics.<model>.>``). Consumers that want
everything subscribe to both ``ROUTING_METRICS`` and ``ROUTING_METRICS + ".>"``.

A consumer that connects late publishes anything on ``SYNC`` and every publisher answers
by re-publishing its latest snapshot on its data subject, so the late consumer holds the
whole fleet within one round trip: nobody has to subscribe before the engines start.
"""

from __future__ import annotations

import re
from enum import Enum
from typing import Final

ROOT: Final = "eagle_eye"
ROUTING_METRICS: Final = f"{ROOT}.routing_metrics"
SYNC: Final = f"{ROOT}.control.sync"

_UNSAFE_TOKEN_CHARS: Final = re.compile(r"[^A-Za-z0-9_\-]")


class SubjectMode(str, Enum):
    """How a publisher names its subject."""

    FLAT = "flat"
    HIERARCHICAL = "hierarchical"


def token(name: str) -> str:
    """Make ``name`` one safe subject token (no dots, wildcards or spaces)."""
    cleaned = _UNSAFE_TOKEN_CHARS.sub("_", name).strip("_")
    return cleaned or "_"


def snapshot_subject(
    base: str, mode: SubjectMode, *, model: str, instance_id: str, dp_rank: int = 0
) -> str:
    """The subject one instance rank publishes on."""
    if mode is SubjectMode.FLAT:
        return base
    instance = instance_id if dp_rank == 0 else f"{instance_id}-dp{dp_rank}"
    return f"{base}.{token(model)}.{token(instance)}"


def consumer_subjects(base: str = ROUTING_METRICS) -> tuple[str, str]:
    """The two subscriptions that receive every snapshot, flat and hierarchical."""
    return base, f"{base}.>"


def validate_subject(subject: str) -> str:
    """Return ``subject`` if it is a valid publish subject, else raise ``ValueError``."""
    if not subject or any(c.isspace() for c in subject):
        raise ValueError(f"invalid NATS subject {subject!r}: empty or contains whitespace")
    parts = subject.split(".")
    if any(not p for p in parts):
        raise ValueError(f"invalid NATS subject {subject!r}: empty token")
    if any(p in ("*", ">") for p in parts):
        raise ValueError(f"invalid NATS subject {subject!r}: wildcards cannot be published to")
    return subject
