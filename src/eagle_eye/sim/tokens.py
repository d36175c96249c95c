"""Prompts to tokens and KV block hashes, and deterministic generated text (pure).

The simulator never runs a tokenizer. What it needs from a prompt is its length in tokens
and the chained hashes of its full KV blocks, because that is what vLLM's automatic
prefix caching keys on: block ``i``'s hash covers the hash of block ``i - 1`` and the
token ids of block ``i``, so two prompts share the first ``k`` blocks exactly when they
share the first ``k * block_size`` tokens.

* Text: UTF-8 bytes in chunks of ``BYTES_PER_TOKEN`` (4, the usual rule of thumb for
  English with BPE tokenizers) are tokens; a token's id is the CRC-32 of its bytes. Two
  texts with a common prefix therefore share blocks up to the last full block inside it.
* Token ids (``prompt`` given as a list of ints, as vLLM accepts): used as they are.
* Mooncake traces: ``hash_ids`` name 512-token blocks (``MOONCAKE_BLOCK_TOKENS``); each
  is expanded into ``512 / block_size`` simulated blocks whose hashes chain on the trace
  ids, so equal id prefixes give equal block-hash prefixes, as the trace intends.

Hashes use Python's ``hash`` on ints and tuples of ints, which is stable across
processes (no hash randomisation for numbers).
"""

from __future__ import annotations

import math
import zlib
from collections.abc import Sequence
from typing import Final

BYTES_PER_TOKEN: Final = 4
MOONCAKE_BLOCK_TOKENS: Final = 512
_TEXT_TAG: Final = 0x7E57
_TOKEN_TAG: Final = 0x70C3
_TRACE_TAG: Final = 0x7ACE

# Output vocabulary: plain words so generated text reads as text and re-tokenises sanely.
_WORD_TEXT: Final = (
    "the of and to in is that for it as with was on be by this are from at or an "
    "which model token cache engine request router metric latency batch prefix block "
    "queue fleet signal stream value state time step first next each more most other "
    "some such only over into than then them these they would could should about "
    "after again all also any because before being both but can did does down during "
    "few further here how just most no nor not now off once own same so very while"
)
_WORDS: Final = tuple(_WORD_TEXT.split())


def text_token_count(text: str) -> int:
    """Tokens the simulator counts for ``text`` (at least 1 for non-empty text)."""
    n = len(text.encode("utf-8"))
    return -(-n // BYTES_PER_TOKEN)


def text_block_hashes(text: str, block_size: int) -> list[int]:
    """Chained hashes of the full blocks of ``text`` (see the module docstring)."""
    data = text.encode("utf-8")
    block_bytes = block_size * BYTES_PER_TOKEN
    hashes: list[int] = []
    parent = _TEXT_TAG
    crc32 = zlib.crc32
    for start in range(0, len(data) - block_bytes + 1, block_bytes):
        parent = hash((parent, crc32(data[start : start + block_bytes])))
        hashes.append(parent)
    return hashes


def token_block_hashes(token_ids: Sequence[int], block_size: int) -> list[int]:
    """Chained hashes of the full blocks of an explicit token-id prompt."""
    hashes: list[int] = []
    parent = _TOKEN_TAG
    for start in range(0, len(token_ids) - block_size + 1, block_size):
        parent = hash((parent, tuple(token_ids[start : start + block_size])))
        hashes.append(parent)
    return hashes


def trace_block_hashes(
    hash_ids: Sequence[int],
    prompt_tokens: int,
    block_size: int,
    trace_block_tokens: int = MOONCAKE_BLOCK_TOKENS,
) -> list[int]:
    """Block hashes for a trace request (Mooncake ``hash_ids`` of 512-token blocks).

    Only blocks fully inside ``prompt_tokens`` get a hash (a partial block is never
    cached), and only as far as ``hash_ids`` reaches.
    """
    if trace_block_tokens % block_size:
        raise ValueError(f"trace block {trace_block_tokens} is not a multiple of {block_size}")
    per_id = trace_block_tokens // block_size
    n_blocks = min(prompt_tokens // block_size, len(hash_ids) * per_id)
    hashes: list[int] = []
    parent = _TRACE_TAG
    for i in range(-(-n_blocks // per_id)):
        parent = hash((parent, hash_ids[i]))
        base = parent * 64
        hashes.extend(base + j for j in range(per_id))
    del hashes[n_blocks:]
    return hashes


def prompt_key(block_hashes: Sequence[int], prompt_tokens: int, seed: int) -> int:
    """A per-prompt key for generated text: equal prompts (and seed) give equal text."""
    last = block_hashes[-1] if block_hashes else 0
    return hash((seed, last, prompt_tokens)) & 0x7FFFFFFF


def text_key(text: str, seed: int) -> int:
    """``prompt_key`` for a text prompt (covers the partial last block too)."""
    return (zlib.crc32(text.encode("utf-8")) ^ (seed * 0x9E3779B1)) & 0x7FFFFFFF


def generated_text(key: int, start: int, count: int) -> str:
    """Text of generated tokens ``start .. start + count - 1`` (one word per token)."""
    words = _WORDS
    n = len(words)
    out = []
    for i in range(start, start + count):
        x = (key * 2654435761 + i * 40503 + (i * i) * 7) & 0xFFFFFFFF
        x ^= x >> 13
        out.append(" " + words[x % n])
    return "".join(out)


def eos_position(key: int, mean_tokens: int) -> int:
    """Where a request would emit EOS: a deterministic draw with the given mean (>= 1).

    Exponential-like (geometric) lengths, the shape chat output lengths roughly have.
    """
    x = ((key * 0x9E3779B1) ^ 0x5BD1E995) & 0xFFFFFFFF
    u = (x + 0.5) / 2**32
    return max(1, round(-math.log(u) * mean_tokens))
