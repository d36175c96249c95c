"""The targeted Prometheus text reader against the format's edge cases."""

from __future__ import annotations

import math

import pytest
from prometheus_client.parser import text_string_to_metric_families

from eagle_eye.publish.agent.promtext import PromParseError, family_prefixes, parse_line, scan


def test_reads_only_the_asked_names_and_skips_comments_and_prefixes() -> None:
    text = (
        "# HELP vllm:num_requests_running Running.\n"
        "# TYPE vllm:num_requests_running gauge\n"
        'vllm:num_requests_running{model_name="m",engine="0"} 3.0\n'
        'vllm:num_requests_running_extra{model_name="m"} 99\n'
        'vllm:num_requests_waiting{model_name="m",engine="0"} 1\n'
    )
    page = scan(text, ["vllm:num_requests_running", "vllm:absent"])
    assert list(page) == ["vllm:num_requests_running"]
    (sample,) = page["vllm:num_requests_running"]
    assert sample.labels == {"model_name": "m", "engine": "0"}
    assert sample.value == 3.0


def test_a_match_on_the_first_line_and_a_line_without_labels() -> None:
    page = scan("tgi_queue_size 4\ntgi_batch_current_size 2\n", ["tgi_queue_size"])
    assert page["tgi_queue_size"][0].value == 4
    assert page["tgi_queue_size"][0].labels == {}


def test_escapes_commas_and_braces_inside_label_values() -> None:
    line = r'm{a="x\"y",b="c\\d",c="line\nbreak",d="1,2}3"} 7'
    sample = parse_line(line)
    assert sample.labels == {"a": 'x"y', "b": "c\\d", "c": "line\nbreak", "d": "1,2}3"}
    assert sample.value == 7


def test_nan_and_infinities_and_timestamps() -> None:
    text = "a NaN\nb +Inf\nc -Inf 1700000000000\nd 1.5e3\n"
    page = scan(text, ["a", "b", "c", "d"])
    assert math.isnan(page["a"][0].value)
    assert page["b"][0].value == math.inf
    assert page["c"][0].value == -math.inf
    assert page["c"][0].timestamp_ms == 1700000000000
    assert page["d"][0].value == 1500.0


def test_trailing_comma_spaces_and_crlf_are_accepted() -> None:
    sample = parse_line('m{ a = "1", b="2", } 3\r')
    assert sample.labels == {"a": "1", "b": "2"}
    assert sample.value == 3


def test_a_page_cut_mid_line_is_an_error() -> None:
    with pytest.raises(PromParseError, match="truncated"):
        scan('vllm:num_requests_running{model_name="m"} 1', ["vllm:num_requests_running"])


@pytest.mark.parametrize(
    "line",
    [
        'm{a="1" 2',  # unterminated label set
        'm{a="1"} ',  # no value
        'm{a="1"} one',  # value not a number
        'm{a="1"} 1 2 3',  # too many fields
        "m{a=1} 2",  # unquoted label value
        'm{1a="x"} 2',  # bad label name
        'm{a="1"} 2 soon',  # timestamp not an integer
    ],
)
def test_malformed_wanted_lines_raise_with_the_line(line: str) -> None:
    with pytest.raises(PromParseError) as info:
        scan(line + "\n", ["m"])
    assert info.value.line is not None


def test_garbage_elsewhere_on_the_page_is_not_looked_at() -> None:
    text = "<html>\x00 not metrics {{{\nm 1\n\xff\xfe garbage\n"
    assert scan(text, ["m"])["m"][0].value == 1


def test_huge_lines_are_rejected_not_parsed() -> None:
    text = 'm{a="' + "x" * 70_000 + '"} 1\n'
    with pytest.raises(PromParseError, match="longer"):
        scan(text, ["m"])


def test_a_huge_page_is_scanned_in_linear_time_and_finds_every_sample() -> None:
    lines = [f'noise_{i}{{a="{i}"}} {i}' for i in range(50_000)]
    lines.insert(25_000, 'wanted{rank="7"} 42')
    page = scan("\n".join(lines) + "\n", ["wanted"])
    assert [(s.labels, s.value) for s in page["wanted"]] == [({"rank": "7"}, 42.0)]


def test_family_prefixes_detects_only_sample_lines() -> None:
    text = "# HELP sglang:x doc\nvllm:num_requests_running 1\n"
    assert family_prefixes(text, ["vllm:", "sglang:"]) == {"vllm:"}


def test_agrees_with_prometheus_client_on_a_real_page(vllm_page: str) -> None:
    names = ["vllm:num_requests_running", "vllm:prompt_tokens_total"]
    ours = scan(vllm_page, names)
    theirs = {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(vllm_page)
        for s in family.samples
        if s.name in names
    }
    mine = {(s.name, tuple(sorted(s.labels.items()))): s.value for n in names for s in ours[n]}
    assert mine == theirs
    assert mine
