"""Minimal OpenAI-API load for the tiny model: one blocking call, or a concurrent burst."""

from __future__ import annotations

import asyncio
import json
import urllib.request

import aiohttp
from vllm_harness import SERVED_MODEL_NAME


def _body(prompt: str, max_tokens: int) -> dict[str, object]:
    # ignore_eos: random weights would otherwise stop at a random length.
    return {
        "model": SERVED_MODEL_NAME,
        "prompt": prompt,
        "max_tokens": max_tokens,
        "temperature": 0.0,
        "ignore_eos": True,
    }


def complete_sync(base_url: str, prompt: str, *, max_tokens: int = 8) -> bool:
    """One completion; True when vLLM answered 200 with the requested token count."""
    request = urllib.request.Request(
        f"{base_url}/v1/completions",
        data=json.dumps(_body(prompt, max_tokens)).encode(),
        headers={"Content-Type": "application/json"},
    )
    with urllib.request.urlopen(request, timeout=120) as response:
        payload = json.loads(response.read())
        return bool(response.status == 200 and payload["usage"]["completion_tokens"] == max_tokens)


async def burst(base_url: str, count: int, *, max_tokens: int, tag: str) -> list[int]:
    """``count`` concurrent completions with distinct prompts; their HTTP statuses."""

    async def one(session: aiohttp.ClientSession, i: int) -> int:
        prompt = f"{tag} request {i}: KV cache usage and waiting requests"
        async with session.post(
            f"{base_url}/v1/completions", json=_body(prompt, max_tokens)
        ) as response:
            await response.read()
            return response.status

    timeout = aiohttp.ClientTimeout(total=300)
    async with aiohttp.ClientSession(timeout=timeout) as session:
        return list(await asyncio.gather(*(one(session, i) for i in range(count))))
