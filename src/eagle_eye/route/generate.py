"""The seed's ``POST /generate``, answered like vLLM's legacy API server (pure parts).

The seed verifies its deployment with ``curl -X POST .../generate -d '{"prompt": "Hello
AI"}'``. Modern engines only speak the OpenAI API, so the router translates: the request
becomes a ``/v1/completions`` body (sampling parameters passed through), and the answer
goes back in the legacy shape ``{"text": [prompt + completion, ...]}``; streaming answers
are a sequence of such objects, each followed by a NUL byte, with the text so far.
"""

from __future__ import annotations

import json
from typing import Any

from eagle_eye.route.requests import ApiError

_LEGACY_DEFAULT_MAX_TOKENS = 16


def to_completions_body(body: dict[str, Any], model: str) -> dict[str, Any]:
    """The ``/v1/completions`` request for a legacy ``/generate`` body."""
    prompt = body.get("prompt")
    if not isinstance(prompt, str):
        raise ApiError(400, "'prompt' must be a string.", param="prompt")
    out = {k: v for k, v in body.items() if k not in ("prompt", "stream", "model")}
    out["model"] = model
    out["prompt"] = prompt
    out["stream"] = bool(body.get("stream", False))
    out.setdefault("max_tokens", _LEGACY_DEFAULT_MAX_TOKENS)
    return out


def legacy_response(prompt: str, completion: dict[str, Any]) -> bytes:
    """``{"text": [...]}`` from a ``/v1/completions`` response object."""
    choices = completion.get("choices")
    texts: list[str] = []
    if isinstance(choices, list):
        ordered = sorted(
            (c for c in choices if isinstance(c, dict)),
            key=lambda c: c.get("index", 0) if isinstance(c.get("index"), int) else 0,
        )
        texts = [prompt + str(c.get("text") or "") for c in ordered]
    return json.dumps({"text": texts}).encode()


class LegacyStream:
    """Turns ``/v1/completions`` SSE bytes into legacy NUL-delimited ``{"text": [...]}``."""

    def __init__(self, prompt: str) -> None:
        self._prompt = prompt
        self._texts: dict[int, str] = {}
        self._buffer = b""
        self.error: dict[str, Any] | None = None

    def feed(self, chunk: bytes) -> bytes:
        """Bytes to send to the client for ``chunk`` (may be empty)."""
        self._buffer += chunk
        out = []
        while b"\n\n" in self._buffer:
            event, self._buffer = self._buffer.split(b"\n\n", 1)
            for line in event.split(b"\n"):
                if not line.startswith(b"data:"):
                    continue
                payload = line[5:].strip()
                if payload == b"[DONE]" or not payload:
                    continue
                try:
                    obj = json.loads(payload)
                except ValueError:
                    continue
                if not isinstance(obj, dict):
                    continue
                if isinstance(obj.get("error"), dict):
                    self.error = obj["error"]
                    out.append(json.dumps({"error": obj["error"]}).encode() + b"\0")
                    continue
                for choice in obj.get("choices") or ():
                    if not isinstance(choice, dict):
                        continue
                    index = choice.get("index", 0)
                    index = index if isinstance(index, int) else 0
                    self._texts[index] = self._texts.get(index, "") + str(choice.get("text") or "")
                out.append(self.current())
        return b"".join(out)

    def current(self) -> bytes:
        texts = [self._prompt + self._texts[i] for i in sorted(self._texts)]
        return json.dumps({"text": texts}).encode() + b"\0"
