"""The Eagle Eye stat logger inside a real ``vllm serve`` (CPU build, tiny random model).

One plugin-enabled server serves the whole module (``eagle_vllm``); it was started while
its NATS server did not exist yet, which is the first thing checked.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import re
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any, Dict  # noqa: UP035 - the seed's code uses these names

import nats
import pytest
from nats.aio.client import Client as NATS_Client
from vllm_client import burst, complete_sync
from vllm_harness import INSTANCE_ID, MAX_NUM_SEQS, EagleVllm

from eagle_eye import subjects
from eagle_eye.observe.watch import WatchOptions, run_watch
from eagle_eye.settings import nats_from_env
from eagle_eye.snapshot import EngineState, Snapshot, decode
from support import async_wait_for

# The first test pays for the shared server's start (30-200 s on 2 busy cores).
pytestmark = [pytest.mark.vllm, pytest.mark.slow, pytest.mark.timeout(900)]


@dataclass
class Feed:
    """Every snapshot our instance published while subscribed, in arrival order."""

    snapshots: list[Snapshot] = field(default_factory=list)
    invalid: int = 0

    def last(self) -> Snapshot:
        return self.snapshots[-1]


@contextlib.asynccontextmanager
async def subscribed(url: str) -> AsyncIterator[Feed]:
    feed = Feed()
    nc = await nats.connect(url)

    async def on_message(msg: Any) -> None:
        try:
            snapshot = decode(msg.data)
        except ValueError:
            feed.invalid += 1
            return
        if snapshot.instance_id == INSTANCE_ID:
            feed.snapshots.append(snapshot)

    for subject in subjects.consumer_subjects():
        await nc.subscribe(subject, cb=on_message)
    await nc.flush()
    try:
        yield feed
    finally:
        await nc.close()


@dataclass
class LoadRun:
    """One burst of load and everything observed around it (shared by several tests)."""

    statuses: list[int]
    feed: Feed
    metrics_before: dict[str, float]
    metrics_after: dict[str, float]
    seconds: float


def _delta(run: LoadRun, name: str) -> float:
    return run.metrics_after.get(name, 0.0) - run.metrics_before.get(name, 0.0)


@pytest.fixture(scope="module")
def load_run(eagle_vllm: EagleVllm) -> LoadRun:
    """3x the batch size of concurrent requests, watched from NATS and from /metrics."""

    async def go() -> LoadRun:
        async with subscribed(eagle_vllm.nats_url) as feed:
            before = eagle_vllm.server.metrics()
            begin = time.monotonic()
            statuses = await burst(
                eagle_vllm.server.url, 3 * MAX_NUM_SEQS, max_tokens=48, tag="load"
            )
            seconds = time.monotonic() - begin
            # Quiescent once the last snapshot says so (the final step's is sent at once).
            assert await async_wait_for(
                lambda: (
                    bool(feed.snapshots) and feed.last().running == 0 and feed.last().waiting == 0
                ),
                10.0,
            )
            after = eagle_vllm.server.metrics()
        return LoadRun(statuses, feed, before, after, seconds)

    return asyncio.run(go())


def test_engine_started_and_served_with_nats_unreachable_saying_so_once(
    eagle_vllm: EagleVllm,
) -> None:
    assert eagle_vllm.served_without_nats
    lines = [line for line in eagle_vllm.startup_log.splitlines() if "NATS unreachable" in line]
    assert len(lines) == 1, lines
    assert f"eagle-eye: NATS unreachable at {eagle_vllm.nats_url}" in lines[0]
    assert "the engine keeps serving" in lines[0]


def test_plugin_is_loaded_from_the_entry_point_group(eagle_vllm: EagleVllm) -> None:
    log = eagle_vllm.startup_log
    assert "Available plugins for group vllm.stat_logger_plugins" in log
    assert "eagle_eye -> eagle_eye.publish.vllm_plugin:EagleEyeStatLogger" in log
    # Our own INFO line shows in vLLM's log stream, in vLLM's format.
    assert re.search(r"INFO .*eagle-eye: publishing tiny-llama as vllm-it to", log), log[-3000:]


async def test_late_subscriber_holds_state_within_one_second(eagle_vllm: EagleVllm) -> None:
    # The server is idle and its heartbeat is 30 s: only SYNC can bring the state now.
    settings = nats_from_env({}, url=eagle_vllm.nats_url)
    assert settings is not None
    begin = time.monotonic()
    table = await asyncio.wait_for(
        run_watch(WatchOptions(nats=settings, as_json=True, count=1), _NullOut()), 1.0
    )
    elapsed_s = time.monotonic() - begin
    (snapshot, _), *_ = table.latest.values()
    assert elapsed_s < 1.0
    assert snapshot.instance_id == INSTANCE_ID
    assert snapshot.state is EngineState.READY
    status, body = await asyncio.to_thread(eagle_vllm.server.get, "/version")
    assert status == 200
    served_version = json.loads(body)["version"]  # whichever vLLM the venv holds
    assert (snapshot.engine, snapshot.engine_version, snapshot.model) == (
        "vllm",
        served_version,
        "tiny-llama",
    )
    assert snapshot.endpoint == "http://127.0.0.1:8000"
    assert snapshot.kv_capacity_tokens is not None and snapshot.kv_capacity_tokens > 0


def test_load_is_served_and_every_step_is_accounted_for(load_run: LoadRun) -> None:
    assert load_run.statuses == [200] * len(load_run.statuses)
    steps = _delta(load_run, "vllm:iteration_tokens_total_count")
    messages = [s for s in load_run.feed.snapshots if s.step_generation_tokens is not None]
    # Coalescing may merge steps that come faster than the sender, but counters make it
    # lossless: the tokens in our messages add up to vLLM's own counters exactly.
    assert sum(s.step_generation_tokens or 0 for s in messages) == _delta(
        load_run, "vllm:generation_tokens_total"
    )
    assert sum(s.step_prompt_tokens or 0 for s in messages) == _delta(
        load_run, "vllm:prompt_tokens_total"
    )
    # And messages do come per step.
    assert steps > 0
    # The sender wakes just after each expected step (it measures the step period), so
    # coalescing is rare; the exact token sums above prove no step is lost anyway.
    assert len(messages) >= 0.9 * steps, f"{len(messages)} messages for {steps:.0f} steps"
    seqs = [s.seq for s in load_run.feed.snapshots]
    assert seqs == sorted(seqs) and len(set(seqs)) == len(seqs)


def test_queue_and_kv_usage_move_with_load(load_run: LoadRun) -> None:
    busy = load_run.feed.snapshots
    assert max(s.running for s in busy) == MAX_NUM_SEQS
    assert max(s.waiting for s in busy) >= MAX_NUM_SEQS  # 3x the batch was sent at once
    assert max(s.kv_usage or 0.0 for s in busy) > 0.0
    assert any(s.ttft_recent_s for s in busy) and any(s.itl_recent_s for s in busy)
    assert max(s.generation_tokens_per_s or 0.0 for s in busy) > 0.0


def test_snapshot_agrees_with_vllm_metrics_at_quiescence(load_run: LoadRun) -> None:
    last, metrics = load_run.feed.last(), load_run.metrics_after
    assert last.running == metrics["vllm:num_requests_running"] == 0
    assert last.waiting == metrics["vllm:num_requests_waiting"] == 0
    assert last.kv_usage == pytest.approx(metrics["vllm:kv_cache_usage_perc"], abs=1e-9)
    assert last.prefix_cache_queries_total == metrics["vllm:prefix_cache_queries_total"]
    assert last.prefix_cache_hits_total == metrics["vllm:prefix_cache_hits_total"]
    assert last.preemptions_total == metrics["vllm:num_preemptions_total"]


# --- The seed's subscriber, as a user would paste it (seed 000), typing import added. ---
logger = logging.getLogger()


class RouterSubscriber:
    def __init__(self, server_address: str, topic: str):
        """
        初始化RouterSubscriber实例
        :param server_address: NATS服务器地址
        :param topic: 订阅的主题
        """
        self.server_address = server_address
        self.topic = topic
        self.client = NATS_Client()

    async def connect(self):
        """
        建立与NATS服务器的连接
        """
        try:
            # 建立NATS长连接
            await self.client.connect(self.server_address)
            logger.info("Connected to NATS server at %s", self.server_address)
        except Exception as e:
            logger.error("Failed to connect to NATS server: %s", e)
            raise e

    async def subscribe(self, topic: str, message_handler):
        """
        订阅指定主题，并将接收到的消息交给业务逻辑处理
        :param message_handler: 业务逻辑处理函数，用于处理接收到的消息
        """
        try:

            async def on_message(msg):
                """
                消息回调函数，处理订阅到的消息
                :param msg: NATS消息
                """
                logger.info("Received message on topic %s", topic)
                await message_handler(msg)

            # 确保NATS连接
            if not self.client.is_connected:
                await self.connect()

            # 注册订阅主题，并绑定消息回调函数
            await self.client.subscribe(topic, cb=on_message)
            logger.info("Successfully subscribed to NATS topic %s", topic)

        except Exception as e:
            logger.error("Failed to subscribe to NATS topic %s: %s", topic, e)
            raise e

    async def message_handler(self, msg) -> None:
        """
        NATS原始回调，负责：
        1. 从msg中解码数据；
        2. 调用parse_message做JSON反序列化；
        3. 将解析后的结构化数据交给后续业务逻辑处理。
        """
        try:
            data = msg.data.decode("utf-8")
        except Exception as exc:  # noqa: BLE001 - the seed's code, verbatim
            logger.error("Failed to decode NATS message: %s", exc)
            return

        data_dict = self.parse_message(data)
        if not data_dict:
            # 解析失败直接返回，避免后续逻辑异常
            return

        # TODO: 在这里处理具体业务逻辑，例如根据指标做路由决策
        ...

    def parse_message(self, data: str) -> Dict[str, Any]:  # noqa: UP006
        """
        将NATS消息体从JSON字符串反序列化为字典。
        解析失败时记录日志并返回空字典。
        """
        try:
            return json.loads(data)
        except Exception as exc:  # noqa: BLE001 - the seed's code, verbatim
            logger.error("Failed to parse message: %s, raw: %r", exc, data)
            return {}


# --- end of the seed's code ---


async def test_seed_router_subscriber_receives_and_parses_our_messages(
    eagle_vllm: EagleVllm, caplog: pytest.LogCaptureFixture
) -> None:
    router = RouterSubscriber(eagle_vllm.nats_url, "eagle_eye.routing_metrics")
    parsed: list[Dict[str, Any]] = []  # noqa: UP006

    async def handler(msg: Any) -> None:
        await router.message_handler(msg)  # the seed's own path must not fail either
        parsed.append(router.parse_message(msg.data.decode("utf-8")))

    caplog.set_level(logging.INFO)
    await router.connect()
    try:
        await router.subscribe(router.topic, handler)
        assert await asyncio.to_thread(complete_sync, eagle_vllm.server.url, "Hello AI")
        assert await async_wait_for(lambda: any(p.get("running") == 0 for p in parsed), 10.0)
    finally:
        await router.client.close()
    assert all(p["instance_id"] == INSTANCE_ID for p in parsed)
    assert {"v", "seq", "timestamp_s", "running", "waiting", "kv_usage"} <= parsed[-1].keys()
    assert not [r for r in caplog.records if r.levelno >= logging.ERROR]


async def test_nats_outage_mid_load_causes_no_errors_and_publishing_resumes(
    eagle_vllm: EagleVllm,
) -> None:
    server, nats_server = eagle_vllm.server, eagle_vllm.nats
    try:
        async with subscribed(eagle_vllm.nats_url) as feed:
            load = asyncio.ensure_future(
                burst(server.url, 3 * MAX_NUM_SEQS, max_tokens=64, tag="outage")
            )
            assert await async_wait_for(lambda: any(s.running > 0 for s in feed.snapshots), 30.0)
            nats_server.stop()
            statuses = await asyncio.wait_for(load, 120.0)
        assert statuses == [200] * len(statuses)
    finally:
        nats_server.start()
    # The plugin reconnects by itself and re-sends its state (no SYNC, heartbeat 30 s).
    async with subscribed(eagle_vllm.nats_url) as feed:
        assert await async_wait_for(lambda: bool(feed.snapshots), 10.0)
        assert feed.last().running == 0 and feed.last().state is EngineState.READY
        before = feed.last().seq
        assert await asyncio.to_thread(complete_sync, server.url, "after the outage")
        assert await async_wait_for(lambda: feed.last().seq > before, 10.0)
    assert not re.search(r'File "[^"]*/eagle_eye/', server.log_text()), "our code raised"


class _NullOut:
    """A text sink for ``run_watch`` (the test reads the returned table instead)."""

    def write(self, _text: str) -> int:
        return 0

    def flush(self) -> None:
        pass

    def isatty(self) -> bool:
        return False
