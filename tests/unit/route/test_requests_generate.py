"""Pure request validation, error bodies, the legacy /generate translation, prefix index."""

from __future__ import annotations

import json

import pytest

from eagle_eye.route.generate import LegacyStream, legacy_response, to_completions_body
from eagle_eye.route.prefix import PrefixIndex, block_hashes
from eagle_eye.route.requests import ApiError, Operation, parse_body


def test_valid_bodies_parse() -> None:
    req = parse_body(b'{"model":"m","messages":[{"role":"user","content":"x"}],"stream":true}',
                     Operation.CHAT)  # fmt: skip
    assert req.model == "m" and req.stream is True
    req = parse_body(b'{"prompt":[1,2,3]}', Operation.COMPLETION)
    assert req.model is None and req.stream is False


@pytest.mark.parametrize(
    ("raw", "param"),
    [
        (b"", None),
        (b"nope", None),
        (b"[]", None),
        (b'{"model":"","messages":[{"role":"u"}]}', "model"),
        (b'{"messages":[],"model":"m"}', "messages"),
        (b'{"messages":[{"role":"u"}],"n":1.5}', "n"),
        (b'{"messages":[{"role":"u"}],"top_p":NaN}', "top_p"),
        (b'{"messages":[{"role":"u"}],"stream_options":[]}', "stream_options"),
    ],
)
def test_bad_bodies_raise_400_naming_the_field(raw: bytes, param: str | None) -> None:
    with pytest.raises(ApiError) as info:
        parse_body(raw, Operation.CHAT)
    assert info.value.status == 400
    assert info.value.param == param
    body = json.loads(info.value.body())
    assert set(body["error"]) == {"message", "type", "param", "code"}


def test_generate_translates_to_completions_and_answers_in_the_legacy_shape() -> None:
    body = to_completions_body({"prompt": "Hello AI", "temperature": 0.5}, "m")
    assert body == {"model": "m", "prompt": "Hello AI", "stream": False, "temperature": 0.5,
                    "max_tokens": 16}  # fmt: skip
    answer = {"choices": [{"index": 1, "text": " b"}, {"index": 0, "text": " a"}]}
    assert json.loads(legacy_response("Hi", answer)) == {"text": ["Hi a", "Hi b"]}


def test_legacy_stream_accumulates_text_across_split_sse_chunks() -> None:
    stream = LegacyStream("Hi")
    event1 = b'data: {"choices":[{"index":0,"text":" one"}]}\n\n'
    event2 = b'data: {"choices":[{"index":0,"text":" two"}]}\n\ndata: [DONE]\n\n'
    out = stream.feed(event1[:10]) + stream.feed(event1[10:] + event2)
    parts = [json.loads(p) for p in out.split(b"\0") if p]
    assert parts == [{"text": ["Hi one"]}, {"text": ["Hi one two"]}]


def test_block_hashes_are_chained_and_ignore_the_partial_tail() -> None:
    a = block_hashes("x" * 300, 128)
    b = block_hashes("x" * 256 + "different tail", 128)
    c = block_hashes("y" + "x" * 299, 128)
    assert len(a) == 2 and a == b
    assert c[0] != a[0] and c[1] != a[1]  # a different first block changes every hash


def test_prefix_index_matches_longest_prefix_per_endpoint_and_is_bounded() -> None:
    index = PrefixIndex(capacity=5)
    h = block_hashes("s" * 128 * 4, 128)
    everyone = ["http://a", "http://b", "http://c"]
    index.insert(h[:2], "http://a")
    index.insert(h, "http://b")
    assert index.match(h, everyone) == {"http://a": 2, "http://b": 4}
    assert index.match(h, ["http://a"]) == {"http://a": 2}
    assert index.deepest_holders(h) == (4, ["http://b"])
    index.insert(block_hashes("z" * 128 * 3, 128), "http://c")
    assert len(index) == 5  # least recently used evicted: the ends of chains go first
    assert index.match(h, everyone) == {"http://a": 2, "http://b": 2}
    index.forget("http://b")
    assert "http://b" not in index.match(h, everyone)
