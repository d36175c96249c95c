"""What the router reads from an engine's answer as it relays it (pure functions of bytes).

Always: the ``usage`` report (token counts for the metrics), found with a byte search
before anything is parsed. Only for requests a trace samples (``RequestContext.detail``):
the response model, id and finish reasons, which the GenAI semantic conventions put on
the request's span. Streams are read event by event as they pass: the first event names
the model and id, and an event with a non-null ``finish_reason`` ends a choice. Nothing
here raises on malformed input: an answer the router cannot read is relayed unread.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any, Final

MAX_PARSED_BYTES: Final = 4 * 1024 * 1024
"""Bodies larger than this are relayed without being parsed for usage."""
_FINISHED: Final = re.compile(rb'"finish_reason"\s*:\s*"')
"""A non-null finish reason (engines write ``"finish_reason":null`` until the end)."""


def usage_of(body: bytes) -> dict[str, Any] | None:
    """The ``usage`` object of a whole JSON answer, if it has one."""
    obj = _json_object(body) if b'"usage"' in body else None
    usage = obj.get("usage") if obj is not None else None
    return usage if isinstance(usage, dict) else None


def stream_usage(chunk: bytes) -> dict[str, Any] | None:
    """Usage from the last ``data:`` event in ``chunk`` that carries one."""
    for line in reversed(chunk.split(b"\n")):
        if line.startswith(b"data:") and b'"usage"' in line:
            usage = usage_of(line[5:].strip())
            if usage is not None:
                return usage
    return None


@dataclass(slots=True)
class AnswerDetail:
    """The response fields a sampled trace records (GenAI ``gen_ai.response.*``)."""

    model: str | None = None
    id: str | None = None
    finish_reasons: list[str] = field(default_factory=list)
    """One per finished choice, in the order the engine reported them."""

    def read_object(self, obj: dict[str, Any]) -> None:
        """Take what one answer object (a whole body or one stream event) says."""
        if self.model is None and isinstance(obj.get("model"), str):
            self.model = obj["model"]
        if self.id is None and isinstance(obj.get("id"), str):
            self.id = obj["id"]
        choices = obj.get("choices")
        if isinstance(choices, list):
            for choice in choices:
                reason = choice.get("finish_reason") if isinstance(choice, dict) else None
                if isinstance(reason, str):
                    self.finish_reasons.append(reason)

    def read_body(self, body: bytes) -> None:
        obj = _json_object(body)
        if obj is not None:
            self.read_object(obj)

    def read_chunk(self, chunk: bytes) -> None:
        """Read the events of one relayed stream chunk that matter: the first one, and
        those that finish a choice. An event split across chunks is skipped."""
        if self.model is not None and _FINISHED.search(chunk) is None:
            return
        for line in chunk.split(b"\n"):
            if not line.startswith(b"data:"):
                continue
            if self.model is None or _FINISHED.search(line) is not None:
                obj = _json_object(line[5:].strip())
                if obj is not None:
                    self.read_object(obj)


def _json_object(raw: bytes) -> dict[str, Any] | None:
    if len(raw) > MAX_PARSED_BYTES:
        return None
    try:
        obj = json.loads(raw)
    except ValueError:
        return None
    return obj if isinstance(obj, dict) else None
