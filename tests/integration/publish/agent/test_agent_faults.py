"""Faults against real sockets: an engine that goes down and comes back, and pages that
are garbage, truncated or too big. Real HTTP server, real nats-server."""

from __future__ import annotations

from eagle_eye.publish.agent.config import AgentConfig, EngineTarget
from eagle_eye.snapshot import EngineState, Snapshot
from support import FIXTURES, async_wait_for
from support.agent import Collector, PageServer, start_agent, stop_agent

PAGE = (FIXTURES / "vllm_0.32_cpu.txt").read_bytes()
CONFIG = AgentConfig(interval_s=0.05, unreachable_after=3, max_backoff_s=0.4, timeout_s=0.5)


def _ready(collector: Collector) -> list[Snapshot]:
    return [s for s in collector.snapshots if s.state is EngineState.READY]


async def test_engine_down_is_published_unreachable_then_recovers(
    nats_url: str, collector: Collector, page_server: PageServer
) -> None:
    page_server.pages["/metrics"] = PAGE
    target = EngineTarget(url=page_server.url, instance_id="engine-x")
    agent = start_agent(nats_url, [target], CONFIG)
    watcher = agent.watchers[0]
    try:
        assert await async_wait_for(lambda: collector.latest("engine-x") is not None, 10)
        ready = collector.latest("engine-x")
        assert ready is not None and ready.state is EngineState.READY and ready.running == 23

        page_server.stop()

        def unreachable() -> bool:
            snap = collector.latest("engine-x")
            return snap is not None and snap.state is EngineState.UNREACHABLE

        assert await async_wait_for(unreachable, 10)
        assert watcher.stats.fetch_failures >= CONFIG.unreachable_after
        assert watcher.stats.unreachable_events == 1
        # Backing off: far fewer attempts than one per interval while it is down.
        failures_then = watcher.stats.fetch_failures
        assert await async_wait_for(lambda: watcher.stats.fetch_failures >= failures_then + 3, 5)

        page_server.start()  # same port again

        def back() -> bool:
            snap = collector.latest("engine-x")
            return snap is not None and snap.state is EngineState.READY

        assert await async_wait_for(back, 10)
        assert watcher.stats.recoveries == 1
        snap = collector.latest("engine-x")
        assert snap is not None and snap.running == 23
    finally:
        await stop_agent(agent)


async def test_garbage_and_truncated_pages_publish_nothing_until_a_good_page(
    nats_url: str, collector: Collector, page_server: PageServer
) -> None:
    page_server.pages["/metrics"] = b"<html><body>502 Bad Gateway</body></html>\n"
    agent = start_agent(nats_url, [EngineTarget(url=page_server.url, kind=None)], CONFIG)
    watcher = agent.watchers[0]
    try:
        assert await async_wait_for(lambda: watcher.stats.parse_errors >= 5, 10)
        # Truncated on the wire: the body is shorter than its Content-Length.
        page_server.pages["/metrics"] = PAGE[: len(PAGE) // 2]
        page_server.declared_length = len(PAGE)
        errors = watcher.stats.parse_errors
        assert await async_wait_for(lambda: watcher.stats.parse_errors >= errors + 3, 10)
        # Truncated at the source: a complete response whose text stops mid-line.
        page_server.declared_length = None
        page_server.pages["/metrics"] = PAGE[: PAGE.index(b"vllm:num_requests_waiting{") + 20]
        errors = watcher.stats.parse_errors
        assert await async_wait_for(lambda: watcher.stats.parse_errors >= errors + 3, 10)
        assert collector.snapshots == []
        assert not watcher.unreachable

        page_server.pages["/metrics"] = PAGE
        assert await async_wait_for(lambda: _ready(collector) != [], 10)
        # A new channel may announce itself as ``loading`` first (the publisher's rule
        # for new lanes); no snapshot ever carries numbers from a bad page.
        assert all(
            s.state is EngineState.LOADING
            for s in collector.snapshots[:-1]
            if s.state is not EngineState.READY
        )
        snap = _ready(collector)[0]
        assert (snap.engine, snap.model, snap.running) == ("vllm", "tiny", 23)
    finally:
        await stop_agent(agent)


async def test_a_page_over_the_size_cap_is_an_error_not_a_snapshot(
    nats_url: str, collector: Collector, page_server: PageServer
) -> None:
    filler = b"".join(b'ray_noise{i="%d"} 1\n' % i for i in range(100_000))
    page_server.pages["/metrics"] = PAGE + filler  # ~2.4 MB
    config = AgentConfig(interval_s=0.05, max_page_bytes=1024 * 1024)
    agent = start_agent(nats_url, [EngineTarget(url=page_server.url)], config)
    watcher = agent.watchers[0]
    try:
        assert await async_wait_for(lambda: watcher.stats.parse_errors >= 3, 10)
        assert "exceeds the cap" in watcher.stats.last_error
        assert collector.snapshots == []
        page_server.pages["/metrics"] = PAGE
        assert await async_wait_for(lambda: _ready(collector) != [], 10)
        assert _ready(collector)[0].running == 23
    finally:
        await stop_agent(agent)
