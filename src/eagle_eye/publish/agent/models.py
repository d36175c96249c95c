"""Ask an engine which model it serves, for pages that do not label it (TGI, llama.cpp).

The OpenAI-compatible ``/v1/models`` (TGI, llama.cpp, vLLM, SGLang all serve it) first,
then TGI's own ``/info`` (``model_id``). Only the first model is used: these engines
serve one. Failures return None; the caller logs and asks the operator for ``--model``.
"""

from __future__ import annotations

import json
from typing import Any

from eagle_eye.publish.agent.http import Fetcher, FetchError, PageTooLargeError, TruncatedPageError
from eagle_eye.snapshot import MAX_NAME_CHARS


def discover_model(fetcher: Fetcher) -> str | None:
    """The served model's name, or None when the engine does not say."""
    body = _get_json(fetcher, "/v1/models")
    if isinstance(body, dict):
        data = body.get("data")
        if isinstance(data, list) and data and isinstance(data[0], dict):
            name = _name(data[0].get("id"))
            if name is not None:
                return name
    body = _get_json(fetcher, "/info")
    if isinstance(body, dict):
        return _name(body.get("model_id"))
    return None


def _get_json(fetcher: Fetcher, path: str) -> Any:
    try:
        response = fetcher.get(path)
    except (FetchError, PageTooLargeError, TruncatedPageError):
        return None
    if response.status != 200:
        return None
    try:
        return json.loads(response.body)
    except (ValueError, UnicodeDecodeError):
        return None


def _name(value: object) -> str | None:
    if isinstance(value, str) and 0 < len(value) <= MAX_NAME_CHARS:
        return value
    return None
