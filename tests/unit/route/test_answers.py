"""Reading an engine's answer as it is relayed: usage always, details when traced."""

from __future__ import annotations

import json

from eagle_eye.route.answers import AnswerDetail, stream_usage, usage_of


def event(obj: object, *, compact: bool = True) -> bytes:
    text = json.dumps(obj, separators=(",", ":")) if compact else json.dumps(obj)
    return b"data: " + text.encode() + b"\n\n"


def chunk(finish: str | None, text: str = "x", *, compact: bool = True) -> bytes:
    choice = {"index": 0, "delta": {"content": text}, "finish_reason": finish}
    return event({"id": "chatcmpl-1", "model": "m1", "choices": [choice]}, compact=compact)


def test_usage_comes_from_whole_bodies_and_stream_events() -> None:
    usage = {"prompt_tokens": 3, "completion_tokens": 5, "total_tokens": 8}
    assert usage_of(json.dumps({"choices": [], "usage": usage}).encode()) == usage
    assert usage_of(b'{"choices": []}') is None
    assert usage_of(b'not json, but mentions "usage"') is None
    stream = chunk(None) + event({"choices": [], "usage": usage}) + b"data: [DONE]\n\n"
    assert stream_usage(stream) == usage


def test_a_whole_answer_gives_model_id_and_every_finish_reason() -> None:
    detail = AnswerDetail()
    detail.read_body(
        json.dumps(
            {
                "id": "cmpl-7",
                "model": "m1",
                "choices": [
                    {"index": 0, "finish_reason": "stop"},
                    {"index": 1, "finish_reason": "length"},
                ],
            }
        ).encode()
    )
    assert (detail.model, detail.id, detail.finish_reasons) == ("m1", "cmpl-7", ["stop", "length"])


def test_a_stream_is_read_at_its_first_event_and_where_a_choice_finishes() -> None:
    for compact in (True, False):  # vLLM writes compact JSON, json.dumps spaces it
        detail = AnswerDetail()
        for piece in (
            chunk(None, compact=compact),
            chunk(None, compact=compact) + chunk("length", compact=compact),
            b"data: [DONE]\n\n",
        ):
            detail.read_chunk(piece)
        assert (detail.model, detail.id, detail.finish_reasons) == ("m1", "chatcmpl-1", ["length"])


def test_unreadable_answers_are_left_alone() -> None:
    detail = AnswerDetail()
    detail.read_body(b"<html>bad gateway</html>")
    detail.read_chunk(b'data: {"broken\n\n')
    detail.read_chunk(b"data: [1, 2]\n\n")
    assert (detail.model, detail.id, detail.finish_reasons) == (None, None, [])
