"""OpenAI/vLLM request bodies in, simulator work orders and response bodies out (pure).

What is accepted mirrors vLLM's OpenAI server (``vllm/entrypoints/openai/protocol.py``):
``prompt`` as a string, a list of one string or token ids; ``messages`` with string or
text-part content; ``max_tokens`` (``max_completion_tokens`` for chat), ``stream``,
``stream_options.include_usage``, ``ignore_eos``. Unknown fields are ignored, as vLLM
does for sampling knobs that do not change the simulation (temperature, top_p, ...).

Simulator extension fields (send them with the ``openai`` client's ``extra_body``):

* ``eagle_eye_hash_ids``: list of ints, Mooncake-style ids of 512-token prompt blocks.
  The prompt's KV blocks are then derived from these ids, so trace replays keep their
  real prefix sharing whatever the prompt text is.
* ``eagle_eye_prompt_tokens``: int, the prompt length in tokens to simulate (defaults to
  the text's simulated token count, or ``512 * len(hash_ids)`` with hash ids and no
  text).

Bad input raises ``BadRequest`` carrying the HTTP status and OpenAI error fields.
"""

from __future__ import annotations

import time
import uuid
from dataclasses import dataclass
from typing import Any

from eagle_eye.errors import EagleEyeError
from eagle_eye.sim.tokens import (
    MOONCAKE_BLOCK_TOKENS,
    prompt_key,
    text_block_hashes,
    text_key,
    text_token_count,
    token_block_hashes,
    trace_block_hashes,
)


class BadRequest(EagleEyeError):
    """A request vLLM would refuse; ``status`` is the HTTP status to answer with."""

    def __init__(
        self,
        message: str,
        *,
        status: int = 400,
        param: str | None = None,
        type_: str = "BadRequestError",
    ) -> None:
        super().__init__(message)
        self.message = message
        self.status = status
        self.param = param
        self.type = type_

    def body(self) -> dict[str, Any]:
        """The OpenAI error object, as vLLM returns it."""
        return {
            "error": {
                "message": self.message,
                "type": self.type,
                "param": self.param,
                "code": self.status,
            }
        }


@dataclass(frozen=True, slots=True)
class WorkOrder:
    """What the engine needs to simulate one request."""

    prompt_text: str | None
    prompt_tokens: int
    block_hashes: list[int]
    key: int
    max_tokens: int | None
    """None: up to the context length (vLLM's default)."""
    ignore_eos: bool
    stream: bool
    include_usage: bool


def _int_field(body: dict[str, Any], name: str, *, minimum: int) -> int | None:
    value = body.get(name)
    if value is None:
        return None
    if type(value) is not int or value < minimum:
        raise BadRequest(f"{name} must be an integer >= {minimum}, got {value!r}", param=name)
    return value


def _prompt_blocks(
    body: dict[str, Any],
    text: str | None,
    token_ids: list[int] | None,
    *,
    block_size: int,
    seed: int,
) -> tuple[int, list[int], int]:
    """``(prompt tokens, KV block hashes, text key)`` of a prompt.

    Trace hash ids win over the text or token ids (they carry the trace's prefix
    sharing); ``eagle_eye_prompt_tokens`` overrides the length in every case.
    """
    hash_ids = body.get("eagle_eye_hash_ids")
    explicit_tokens = _int_field(body, "eagle_eye_prompt_tokens", minimum=1)
    if hash_ids is not None:
        if not isinstance(hash_ids, list) or not all(type(h) is int for h in hash_ids):
            raise BadRequest(
                "eagle_eye_hash_ids must be a list of integers", param="eagle_eye_hash_ids"
            )
        if explicit_tokens is not None:
            n = explicit_tokens
        elif text is not None and text:
            n = text_token_count(text)
        elif token_ids:
            n = len(token_ids)
        else:
            n = max(1, MOONCAKE_BLOCK_TOKENS * len(hash_ids))
        hashes = trace_block_hashes(hash_ids, n, block_size)
        key = prompt_key(hashes, n, seed) if hashes else text_key(text or "", seed)
    elif token_ids is not None:
        n = explicit_tokens or len(token_ids)
        hashes = token_block_hashes(token_ids, block_size)
        key = prompt_key(hashes, n, seed) ^ len(token_ids)
    else:
        assert text is not None
        n = explicit_tokens or text_token_count(text)
        hashes = text_block_hashes(text, block_size)
        key = text_key(text, seed)
    return n, hashes, key


def _stream_options(body: dict[str, Any]) -> tuple[bool, bool]:
    """``(stream, include_usage)``; ``stream_options`` only make sense when streaming."""
    stream = bool(body.get("stream", False))
    options = body.get("stream_options") or {}
    if options and not isinstance(options, dict):
        raise BadRequest("stream_options must be an object", param="stream_options")
    if options and not stream:
        raise BadRequest(
            "Stream options can only be defined when `stream=True`.", param="stream_options"
        )
    return stream, bool(options.get("include_usage", False))


def _common(
    body: dict[str, Any],
    text: str | None,
    token_ids: list[int] | None,
    *,
    block_size: int,
    seed: int,
    max_tokens_names: tuple[str, ...],
) -> WorkOrder:
    """The work order of a prompt given as ``text`` or ``token_ids``, checked in vLLM's order."""
    n, hashes, key = _prompt_blocks(body, text, token_ids, block_size=block_size, seed=seed)
    if n <= 0:
        raise BadRequest("the prompt is empty", param="prompt")
    max_tokens = None
    for name in max_tokens_names:
        value = _int_field(body, name, minimum=1)
        if value is not None:
            max_tokens = value
            break
    if body.get("n", 1) not in (1, None):
        raise BadRequest("the simulator supports n=1 only", param="n")
    stream, include_usage = _stream_options(body)
    return WorkOrder(
        prompt_text=text,
        prompt_tokens=n,
        block_hashes=hashes,
        key=key,
        max_tokens=max_tokens,
        ignore_eos=bool(body.get("ignore_eos", False)),
        stream=stream,
        include_usage=include_usage,
    )


def parse_completion(body: dict[str, Any], *, block_size: int, seed: int) -> WorkOrder:
    """``/v1/completions`` (and the seed's ``/generate``, which has no ``model``)."""
    prompt = body.get("prompt")
    if isinstance(prompt, list) and len(prompt) == 1 and isinstance(prompt[0], (str, list)):
        prompt = prompt[0]
    if isinstance(prompt, str):
        return _common(
            body, prompt, None, block_size=block_size, seed=seed, max_tokens_names=("max_tokens",)
        )
    if isinstance(prompt, list) and prompt and all(type(t) is int and t >= 0 for t in prompt):
        return _common(
            body, None, prompt, block_size=block_size, seed=seed, max_tokens_names=("max_tokens",)
        )
    if prompt is None and body.get("eagle_eye_hash_ids") is not None:
        return _common(
            body, "", None, block_size=block_size, seed=seed, max_tokens_names=("max_tokens",)
        )
    raise BadRequest(
        "prompt must be a string, a list with one string, or a list of token ids", param="prompt"
    )


def render_messages(messages: Any) -> str:
    """A plain chat template: ``<|role|>content`` per message, then the assistant turn."""
    if not isinstance(messages, list) or not messages:
        raise BadRequest("messages must be a non-empty list", param="messages")
    parts: list[str] = []
    for m in messages:
        if not isinstance(m, dict) or not isinstance(m.get("role"), str):
            raise BadRequest("each message needs a role", param="messages")
        content = m.get("content")
        if isinstance(content, list):
            texts = [
                p.get("text", "")
                for p in content
                if isinstance(p, dict) and p.get("type") == "text"
            ]
            content = "".join(t for t in texts if isinstance(t, str))
        elif content is None:
            content = ""
        elif not isinstance(content, str):
            raise BadRequest(
                "message content must be a string or a list of parts", param="messages"
            )
        parts.append(f"<|{m['role']}|>{content}\n")
    parts.append("<|assistant|>")
    return "".join(parts)


def parse_chat(body: dict[str, Any], *, block_size: int, seed: int) -> WorkOrder:
    """``/v1/chat/completions``."""
    text = render_messages(body.get("messages"))
    return _common(
        body, text, None, block_size=block_size, seed=seed,
        max_tokens_names=("max_completion_tokens", "max_tokens"),
    )  # fmt: skip


def new_id(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex}"


def usage(
    prompt_tokens: int, completion_tokens: int, cached_tokens: int | None = None
) -> dict[str, Any]:
    out: dict[str, Any] = {
        "prompt_tokens": prompt_tokens,
        "total_tokens": prompt_tokens + completion_tokens,
        "completion_tokens": completion_tokens,
    }
    if cached_tokens is not None:
        out["prompt_tokens_details"] = {"cached_tokens": cached_tokens}
    return out


def completion_chunk(
    rid: str,
    model: str,
    created: int,
    text: str,
    finish_reason: str | None,
    *,
    chat: bool,
    first: bool = False,
) -> dict[str, Any]:
    """One SSE ``data:`` object of a streamed (chat) completion."""
    if chat:
        delta: dict[str, Any] = {"content": text}
        if first:
            delta = {"role": "assistant", "content": text}
        choice: dict[str, Any] = {
            "index": 0,
            "delta": delta,
            "logprobs": None,
            "finish_reason": finish_reason,
        }
        return {
            "id": rid,
            "object": "chat.completion.chunk",
            "created": created,
            "model": model,
            "choices": [choice],
        }
    choice = {
        "index": 0,
        "text": text,
        "logprobs": None,
        "finish_reason": finish_reason,
        "stop_reason": None,
    }
    return {
        "id": rid,
        "object": "text_completion",
        "created": created,
        "model": model,
        "choices": [choice],
    }


def usage_chunk(
    rid: str, model: str, created: int, usage_obj: dict[str, Any], *, chat: bool
) -> dict[str, Any]:
    obj = "chat.completion.chunk" if chat else "text_completion"
    return {
        "id": rid,
        "object": obj,
        "created": created,
        "model": model,
        "choices": [],
        "usage": usage_obj,
    }


def completion_body(
    rid: str,
    model: str,
    created: int,
    text: str,
    finish_reason: str,
    usage_obj: dict[str, Any],
    *,
    chat: bool,
) -> dict[str, Any]:
    """The non-streaming response."""
    if chat:
        choice: dict[str, Any] = {
            "index": 0,
            "message": {"role": "assistant", "content": text, "tool_calls": []},
            "logprobs": None,
            "finish_reason": finish_reason,
            "stop_reason": None,
        }
        return {
            "id": rid,
            "object": "chat.completion",
            "created": created,
            "model": model,
            "choices": [choice],
            "usage": usage_obj,
        }
    choice = {
        "index": 0,
        "text": text,
        "logprobs": None,
        "finish_reason": finish_reason,
        "stop_reason": None,
    }
    return {
        "id": rid,
        "object": "text_completion",
        "created": created,
        "model": model,
        "choices": [choice],
        "usage": usage_obj,
    }


def models_body(model: str, max_model_len: int, created: int | None = None) -> dict[str, Any]:
    created = int(time.time()) if created is None else created
    return {
        "object": "list",
        "data": [
            {
                "id": model,
                "object": "model",
                "created": created,
                "owned_by": "vllm",
                "root": model,
                "parent": None,
                "max_model_len": max_model_len,
                "permission": [],
            }
        ],
    }
