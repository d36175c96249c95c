"""The watcher's fault handling, driven through its fetcher seam (no sockets)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from eagle_eye.publish.agent.config import AgentConfig, EngineTarget
from eagle_eye.publish.agent.engines import EngineKind, RankKey
from eagle_eye.publish.agent.http import FetchError, PageTooLargeError, Response
from eagle_eye.publish.agent.watcher import EngineWatcher
from eagle_eye.publish.publisher import Publisher
from eagle_eye.snapshot import EngineState
from support import FIXTURES, fixture_page

VLLM = fixture_page("vllm_old_names_dp2.txt").encode()


class ScriptedFetcher:
    """Answers from a per-path script; an exception in the script is raised."""

    def __init__(self) -> None:
        self.metrics: list[Response | Exception] = []
        self.other: dict[str, Response] = {}
        self.calls: list[str] = []

    def get(self, path: str) -> Response:
        self.calls.append(path)
        if path.startswith("/metrics"):
            item = self.metrics.pop(0) if len(self.metrics) > 1 else self.metrics[0]
            if isinstance(item, Exception):
                raise item
            return item
        return self.other.get(path, Response(404, b""))

    def close(self) -> None:
        pass


@pytest.fixture
def publisher() -> Iterator[Publisher]:
    inert = Publisher(None)  # channels accept samples, nothing is sent
    yield inert
    inert.close()


def _watcher(publisher: Publisher, fetcher: ScriptedFetcher, **target: object) -> EngineWatcher:
    config = AgentConfig(interval_s=0.1, unreachable_after=3, max_backoff_s=1.0)
    return EngineWatcher(
        EngineTarget(url="http://127.0.0.1:8000", **target),  # type: ignore[arg-type]
        publisher,
        config,
        fetcher,
    )


def test_auto_detects_and_opens_one_channel_per_rank(publisher: Publisher) -> None:
    fetcher = ScriptedFetcher()
    fetcher.metrics = [Response(200, VLLM)]
    watcher = _watcher(publisher, fetcher, advertise="http://10.0.0.5:8000")
    assert watcher.poll_once() == 0.1
    assert watcher.kind is EngineKind.VLLM
    channels = watcher.channels
    assert sorted(channels) == [RankKey("llama-8b", 0), RankKey("llama-8b", 1)]
    rank1 = channels[RankKey("llama-8b", 1)]
    assert rank1.identity.instance_id == "10.0.0.5:8000"
    assert rank1.identity.dp_rank == 1
    assert rank1.identity.endpoint == "http://10.0.0.5:8000"
    assert rank1.identity.engine == "vllm"
    assert rank1.identity.kv_capacity_tokens == 4096 * 16
    assert (rank1.latest.running, rank1.latest.waiting, rank1.latest.kv_usage) == (6, 3, 0.5)
    snapshot = rank1.build_snapshot(1000.0, rank1.latest.monotonic_s)
    assert snapshot.prefix_cache_hits_total == 1500
    assert snapshot.state is EngineState.READY


def test_unreachable_after_n_failures_with_backoff_then_recovery(publisher: Publisher) -> None:
    fetcher = ScriptedFetcher()
    fetcher.metrics = [Response(200, VLLM)]
    watcher = _watcher(publisher, fetcher)
    watcher.poll_once()
    fetcher.metrics = [FetchError("refused")]
    delays = [watcher.poll_once() for _ in range(6)]
    assert delays[:2] == [0.1, 0.1]  # still within the tolerated failures
    assert delays[2:] == [0.2, 0.4, 0.8, 1.0]  # exponential, capped at max_backoff_s
    assert watcher.unreachable
    assert watcher.stats.unreachable_events == 1
    for channel in watcher.channels.values():
        assert channel.latest.state is EngineState.UNREACHABLE
        assert channel.latest.running in (4, 6)  # last known numbers kept
    fetcher.metrics = [Response(200, VLLM)]
    assert watcher.poll_once() == 0.1
    assert not watcher.unreachable
    assert watcher.stats.recoveries == 1
    assert all(c.latest.state is EngineState.READY for c in watcher.channels.values())


def test_http_errors_count_as_failures(publisher: Publisher) -> None:
    fetcher = ScriptedFetcher()
    fetcher.metrics = [Response(503, b"busy")]
    watcher = _watcher(publisher, fetcher)
    for _ in range(3):
        watcher.poll_once()
    assert watcher.unreachable
    assert "HTTP 503" in watcher.stats.last_error


def test_an_engine_never_seen_is_announced_only_with_a_model(publisher: Publisher) -> None:
    fetcher = ScriptedFetcher()
    fetcher.metrics = [FetchError("refused")]
    anonymous = _watcher(publisher, fetcher, kind=EngineKind.TGI)
    for _ in range(3):
        anonymous.poll_once()
    assert anonymous.channels == {}
    named = _watcher(publisher, fetcher, kind=EngineKind.TGI, model="bloom")
    for _ in range(3):
        named.poll_once()
    (channel,) = named.channels.values()
    assert channel.latest.state is EngineState.UNREACHABLE
    assert channel.identity.model == "bloom"


@pytest.mark.parametrize(
    "bad",
    [
        Response(200, b"<html>502</html>\n"),
        Response(200, VLLM[: VLLM.index(b"vllm:num_requests_waiting{") + 30]),
        Response(200, b"\xff\xfe\x00garbage"),
        PageTooLargeError(10_000_000, 8_000_000),
    ],
    ids=["garbage", "truncated", "not-utf8", "huge"],
)
def test_bad_pages_are_counted_and_publish_nothing(
    publisher: Publisher, bad: Response | Exception
) -> None:
    fetcher = ScriptedFetcher()
    fetcher.metrics = [bad]
    watcher = _watcher(publisher, fetcher, kind=EngineKind.VLLM)
    for _ in range(5):
        assert watcher.poll_once() == 0.1
    assert watcher.stats.parse_errors == 5
    assert watcher.channels == {}
    assert not watcher.unreachable  # the engine answered; it is not down


def test_a_bad_page_between_good_ones_leaves_the_last_sample(publisher: Publisher) -> None:
    fetcher = ScriptedFetcher()
    fetcher.metrics = [Response(200, VLLM), Response(200, b"garbage\n"), Response(200, VLLM)]
    watcher = _watcher(publisher, fetcher)
    watcher.poll_once()
    before = {k: c.latest for k, c in watcher.channels.items()}
    watcher.poll_once()
    assert {k: c.latest for k, c in watcher.channels.items()} == before
    assert watcher.stats.parse_errors == 1
    watcher.poll_once()
    assert watcher.stats.pages_ok == 2


def test_ranks_that_vanish_are_forgotten(publisher: Publisher) -> None:
    one_rank = b"".join(line + b"\n" for line in VLLM.splitlines() if b'engine="1"' not in line)
    fetcher = ScriptedFetcher()
    fetcher.metrics = [Response(200, VLLM)] + [Response(200, one_rank)] * 60
    watcher = _watcher(publisher, fetcher)
    for _ in range(51):
        watcher.poll_once()
    assert list(watcher.channels) == [RankKey("llama-8b", 0)]


def test_model_for_unlabelled_pages_comes_from_v1_models(publisher: Publisher) -> None:
    fetcher = ScriptedFetcher()
    fetcher.metrics = [Response(200, fixture_page("tgi_3.x.txt").encode())]
    fetcher.other["/v1/models"] = Response(200, b'{"data": [{"id": "bigscience/bloom"}]}')
    watcher = _watcher(publisher, fetcher)
    watcher.poll_once()
    (channel,) = watcher.channels.values()
    assert channel.identity.model == "bigscience/bloom"
    assert channel.identity.engine == "tgi"


def test_tgi_info_is_the_fallback_for_the_model_name(publisher: Publisher) -> None:
    fetcher = ScriptedFetcher()
    fetcher.metrics = [Response(200, fixture_page("tgi_3.x.txt").encode())]
    fetcher.other["/info"] = Response(200, b'{"model_id": "tgi-model"}')
    watcher = _watcher(publisher, fetcher)
    watcher.poll_once()
    (channel,) = watcher.channels.values()
    assert channel.identity.model == "tgi-model"


def test_sglang_loads_are_used_when_present(publisher: Publisher) -> None:
    fetcher = ScriptedFetcher()
    fetcher.metrics = [Response(200, fixture_page("sglang_dp2_tp2.txt").encode())]
    fetcher.other["/v1/loads?include=core"] = Response(
        200, (FIXTURES / "sglang_loads.json").read_bytes()
    )
    watcher = _watcher(publisher, fetcher)
    watcher.poll_once()
    rank1 = watcher.channels[RankKey("qwen", 1)]
    assert (rank1.latest.running, rank1.latest.waiting) == (9, 8)
    assert rank1.identity.engine_version == "0.5.23"


def test_sglang_without_loads_is_probed_once(publisher: Publisher) -> None:
    fetcher = ScriptedFetcher()
    fetcher.metrics = [Response(200, fixture_page("sglang_dp2_tp2.txt").encode())]
    watcher = _watcher(publisher, fetcher)
    for _ in range(5):
        watcher.poll_once()
    assert fetcher.calls.count("/v1/loads?include=core") == 1
    assert watcher.channels[RankKey("qwen", 1)].latest.waiting == 7


def test_ray_replicas_and_models_get_distinct_instance_ids(publisher: Publisher) -> None:
    fetcher = ScriptedFetcher()
    fetcher.metrics = [Response(200, fixture_page("ray_serve_llm_2.60.txt").encode())]
    watcher = _watcher(
        publisher, fetcher, advertise="http://serve:8000", instance_id="raycluster-1"
    )
    watcher.poll_once()
    ids = sorted(c.identity.instance_id for c in watcher.channels.values())
    assert ids == [
        "raycluster-1/p7511c0g",
        "raycluster-1/thnmip3c",
        "raycluster-1/zlilrfz4",
    ]
    assert {c.identity.engine for c in watcher.channels.values()} == {"ray-serve"}
    assert {c.identity.endpoint for c in watcher.channels.values()} == {"http://serve:8000"}


def test_target_url_forms() -> None:
    full = EngineTarget(url="http://127.0.0.1:9000/metrics")
    assert (full.base_url, full.metrics_path, full.endpoint) == (
        "http://127.0.0.1:9000",
        "/metrics",
        "http://127.0.0.1:9000",
    )
    assert full.base_instance_id == "127.0.0.1:9000"
    prefixed = EngineTarget(url="http://h/llm/", advertise="http://pod:8000/")
    assert (prefixed.base_url, prefixed.endpoint) == ("http://h/llm", "http://pod:8000")
    assert prefixed.base_instance_id == "pod:8000"
