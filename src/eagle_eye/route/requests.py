"""Client request validation and OpenAI-style error bodies (pure).

Every client mistake becomes an ``ApiError`` with the HTTP status and the error object an
OpenAI SDK understands; the gateway turns it into a response. Nothing a client sends can
produce a 500: the checks below run before any routing.

Error tree::

    ApiError(status, message, type, code, param)
      400 invalid_request_error   malformed JSON, wrong types, missing fields
      401 authentication_error    missing or unknown API key
      404 not_found_error         unknown model (code model_not_found), unknown path
      413 invalid_request_error   body larger than the limit (code request_too_large)
      429 rate_limit_error        admission limit reached (with Retry-After)
      502/503/504 service_unavailable / upstream errors
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from enum import Enum
from typing import Any

from eagle_eye.errors import EagleEyeError


class ApiError(EagleEyeError):
    """An error to answer with; ``headers`` adds e.g. ``Retry-After``."""

    def __init__(
        self,
        status: int,
        message: str,
        *,
        type: str = "invalid_request_error",
        code: str | None = None,
        param: str | None = None,
        headers: dict[str, str] | None = None,
    ) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.type = type
        self.code = code
        self.param = param
        self.headers = headers or {}

    def body(self) -> bytes:
        return error_body(self.message, type=self.type, code=self.code, param=self.param)


def error_body(
    message: str,
    *,
    type: str,
    code: str | None = None,
    param: str | None = None,
) -> bytes:
    """``{"error": {"message", "type", "param", "code"}}`` as the OpenAI API sends it."""
    return json.dumps(
        {"error": {"message": message, "type": type, "param": param, "code": code}}
    ).encode()


class Operation(str, Enum):
    """Which API a request came in on (OpenTelemetry ``gen_ai.operation.name``)."""

    CHAT = "chat"
    COMPLETION = "text_completion"
    GENERATE = "generate"


@dataclass(frozen=True, slots=True)
class ClientRequest:
    """A validated request body."""

    operation: Operation
    body: dict[str, Any]
    model: str | None
    stream: bool


_INT_FIELDS = ("max_tokens", "max_completion_tokens", "n", "top_k", "seed", "logprobs")
_NUMBER_FIELDS = ("temperature", "top_p", "presence_penalty", "frequency_penalty", "min_p")


def parse_body(raw: bytes, operation: Operation) -> ClientRequest:
    """Parse and type-check a request body; raises ``ApiError`` (400) naming the field."""
    if not raw:
        raise ApiError(400, "Request body is empty; send a JSON object.")
    try:
        body = json.loads(raw)
    except (ValueError, UnicodeDecodeError) as exc:
        raise ApiError(400, f"Request body is not valid JSON: {exc}") from None
    if not isinstance(body, dict):
        raise ApiError(400, "Request body must be a JSON object.")
    model = body.get("model")
    if model is not None and (not isinstance(model, str) or not model):
        raise ApiError(400, "'model' must be a non-empty string.", param="model")
    stream = body.get("stream", False)
    if stream is None:
        stream = False
    if not isinstance(stream, bool):
        raise ApiError(400, "'stream' must be a boolean.", param="stream")
    if operation is Operation.CHAT:
        messages = body.get("messages")
        if not isinstance(messages, list) or not messages:
            raise ApiError(400, "'messages' must be a non-empty array.", param="messages")
        for i, m in enumerate(messages):
            if not isinstance(m, dict) or not isinstance(m.get("role"), str):
                raise ApiError(
                    400, f"messages[{i}] must be an object with a 'role'.", param="messages"
                )
    else:
        prompt = body.get("prompt")
        if not _is_prompt(prompt):
            raise ApiError(
                400,
                "'prompt' must be a string, an array of strings or an array of token ids.",
                param="prompt",
            )
    for name in _INT_FIELDS:
        value = body.get(name)
        if value is not None and (type(value) is not int or value < 0):
            raise ApiError(400, f"'{name}' must be a non-negative integer.", param=name)
    for name in _NUMBER_FIELDS:
        value = body.get(name)
        if value is not None and (type(value) not in (int, float) or value != value):
            raise ApiError(400, f"'{name}' must be a number.", param=name)
    options = body.get("stream_options")
    if options is not None and not isinstance(options, dict):
        raise ApiError(400, "'stream_options' must be an object.", param="stream_options")
    return ClientRequest(operation=operation, body=body, model=model, stream=stream)


def _is_prompt(prompt: Any) -> bool:
    if isinstance(prompt, str):
        return True
    if isinstance(prompt, list) and prompt:
        if all(isinstance(p, str) for p in prompt):
            return True
        if all(type(p) is int for p in prompt):
            return True
        return all(isinstance(p, list) and all(type(t) is int for t in p) for p in prompt)
    return False
