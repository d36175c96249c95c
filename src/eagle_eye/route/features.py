"""What a routing policy knows about a request, extracted once from its JSON body.

Pure functions: the gateway parses the body, calls ``request_features`` and hands the
result to a policy. Offline drivers (the benchmark's simulator replays) build
``RequestFeatures`` directly.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from eagle_eye.route.prefix import CHARS_PER_TOKEN, DEFAULT_BLOCK_CHARS, block_hashes


@dataclass(frozen=True, slots=True)
class RequestFeatures:
    """One request as policies see it."""

    model: str
    prompt_tokens: int = 0
    """Estimated prompt length in tokens."""
    max_tokens: int | None = None
    prefix_hashes: tuple[int, ...] = ()
    """Chained hashes of the prompt's leading blocks (``prefix.block_hashes``)."""
    session_key: str | None = None
    """Sticky-session key (header ``x-session-id`` or the OpenAI ``user`` field)."""
    now_mono_s: float = 0.0
    """When the request is routed (router monotonic clock), for snapshot staleness."""


def prompt_text(body: dict[str, Any]) -> str:
    """The text an engine will prefill: chat messages flattened in order, or the prompt.

    Roles are kept so a shared system prompt hashes the same across requests while a
    different role layout does not. Non-text content parts are skipped.
    """
    messages = body.get("messages")
    if isinstance(messages, list):
        parts: list[str] = []
        for m in messages:
            if not isinstance(m, dict):
                continue
            role = m.get("role")
            parts.append(f"<{role}>" if isinstance(role, str) else "<>")
            content = m.get("content")
            if isinstance(content, str):
                parts.append(content)
            elif isinstance(content, list):
                for part in content:
                    if isinstance(part, dict) and isinstance(part.get("text"), str):
                        parts.append(part["text"])
        return "\n".join(parts)
    prompt = body.get("prompt")
    if isinstance(prompt, str):
        return prompt
    if isinstance(prompt, list) and prompt and isinstance(prompt[0], str):
        return str(prompt[0])
    return ""


def request_features(
    body: dict[str, Any],
    *,
    model: str,
    session_key: str | None,
    now_mono_s: float,
    block_chars: int = DEFAULT_BLOCK_CHARS,
    with_prefix: bool = True,
) -> RequestFeatures:
    """Features of an OpenAI-style request body (already validated by the gateway)."""
    text = prompt_text(body)
    max_tokens = body.get("max_tokens")
    if max_tokens is None:
        max_tokens = body.get("max_completion_tokens")
    if session_key is None:
        user = body.get("user")
        session_key = user if isinstance(user, str) and user else None
    return RequestFeatures(
        model=model,
        prompt_tokens=int(len(text) / CHARS_PER_TOKEN),
        max_tokens=max_tokens if type(max_tokens) is int else None,
        prefix_hashes=block_hashes(text, block_chars) if with_prefix else (),
        session_key=session_key,
        now_mono_s=now_mono_s,
    )
