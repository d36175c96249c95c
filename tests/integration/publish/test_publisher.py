"""The background publisher against a real nats-server: delivery, coalescing, heartbeats,
sync for late subscribers, outages, auth and shutdown."""

from __future__ import annotations

import logging
import time
from collections.abc import AsyncIterator, Iterator

import nats
import pytest
from nats.aio.client import Client

from eagle_eye import subjects
from eagle_eye.bus.embedded import EmbeddedNats
from eagle_eye.publish.channel import InstanceIdentity, Sample
from eagle_eye.publish.publisher import Publisher
from eagle_eye.settings import NatsSettings
from eagle_eye.snapshot import EngineState, Snapshot, decode
from eagle_eye.subjects import SubjectMode
from support import async_wait_for, free_tcp_port, wait_for

IDENTITY = InstanceIdentity(
    instance_id="engine-a", model="m", engine="sim", endpoint="http://127.0.0.1:9"
)


class Collector:
    """A subscriber that decodes every message it gets."""

    def __init__(self) -> None:
        self.snapshots: list[Snapshot] = []
        self.client: Client | None = None

    async def start(self, url: str, subject: str = subjects.ROUTING_METRICS) -> None:
        self.client = await nats.connect(url)

        async def on_message(msg: object) -> None:
            self.snapshots.append(decode(msg.data))  # type: ignore[attr-defined]

        await self.client.subscribe(subject, cb=on_message)
        await self.client.flush()

    async def sync(self) -> None:
        assert self.client is not None
        await self.client.publish(subjects.SYNC, b"")

    def latest(self) -> Snapshot | None:
        return self.snapshots[-1] if self.snapshots else None


@pytest.fixture
async def collector(nats_url: str) -> AsyncIterator[Collector]:
    c = Collector()
    await c.start(nats_url)
    yield c
    assert c.client is not None
    await c.client.close()


@pytest.fixture
def publisher(nats_url: str) -> Iterator[Publisher]:
    pub = Publisher(NatsSettings(servers=(nats_url,)), heartbeat_s=0.2)
    assert pub.wait_connected(5)
    yield pub
    pub.close()


def sample(running: int, **kw: object) -> Sample:
    return Sample(running=running, monotonic_s=time.monotonic(), **kw)  # type: ignore[arg-type]


async def test_offered_samples_arrive_in_order_with_increasing_seq(
    publisher: Publisher, collector: Collector
) -> None:
    channel = publisher.channel(IDENTITY)
    for running in range(1, 6):
        channel.offer(sample(running, prompt_tokens_total=10 * running))
        assert await async_wait_for(
            lambda r=running: any(s.running == r for s in collector.snapshots), 2
        )
    seqs = [s.seq for s in collector.snapshots]
    assert seqs == sorted(seqs) and len(set(seqs)) == len(seqs)
    last = collector.latest()
    assert last is not None and last.endpoint == "http://127.0.0.1:9"
    assert last.step_prompt_tokens == 10  # delta since the previous message


async def test_a_burst_is_coalesced_and_the_newest_sample_wins(
    publisher: Publisher, collector: Collector
) -> None:
    channel = publisher.channel(IDENTITY)
    for running in range(2000):
        channel.offer(sample(running))
    assert await async_wait_for(
        lambda: collector.latest() is not None and collector.latest().running == 1999,  # type: ignore[union-attr]
        3,
    )
    assert publisher.stats.coalesced > 0
    assert len(collector.snapshots) < 2000


async def test_idle_instance_sends_heartbeats(publisher: Publisher, collector: Collector) -> None:
    channel = publisher.channel(IDENTITY)
    channel.offer(sample(1))
    assert await async_wait_for(lambda: len(collector.snapshots) >= 4, 3)
    assert {s.running for s in collector.snapshots[1:]} == {1}


async def test_late_subscriber_gets_every_instance_after_sync(
    nats_url: str, publisher: Publisher
) -> None:
    publisher._heartbeat_s = 60.0  # heartbeats must not be what delivers the state
    for i in range(3):
        channel = publisher.channel(InstanceIdentity(instance_id=f"e{i}", model="m", engine="sim"))
        channel.offer(sample(i))
    assert await async_wait_for(lambda: publisher.stats.sent >= 3, 2)
    late = Collector()
    await late.start(nats_url)
    started = time.monotonic()
    await late.sync()
    assert await async_wait_for(
        lambda: {s.instance_id for s in late.snapshots} == {"e0", "e1", "e2"}, 1.0
    )
    assert time.monotonic() - started < 1.0
    assert late.client is not None
    await late.client.close()


async def test_hierarchical_subjects_carry_model_and_instance(nats_url: str) -> None:
    c = Collector()
    await c.start(nats_url, subject=f"{subjects.ROUTING_METRICS}.>")
    pub = Publisher(NatsSettings(servers=(nats_url,)), subject_mode=SubjectMode.HIERARCHICAL)
    try:
        pub.channel(IDENTITY).offer(sample(3))
        assert await async_wait_for(lambda: c.latest() is not None, 2)
    finally:
        pub.close()
    assert c.client is not None
    await c.client.close()


async def test_close_publishes_a_final_stopping_snapshot(
    nats_url: str, collector: Collector
) -> None:
    pub = Publisher(NatsSettings(servers=(nats_url,)))
    pub.channel(IDENTITY).offer(sample(2))
    assert await async_wait_for(lambda: collector.latest() is not None, 2)
    pub.close()
    assert await async_wait_for(
        lambda: collector.latest() is not None and collector.latest().state is EngineState.STOPPING,  # type: ignore[union-attr]
        2,
    )


def test_publisher_started_before_nats_connects_when_it_appears(
    caplog: pytest.LogCaptureFixture,
) -> None:
    port = free_tcp_port()
    caplog.set_level(logging.WARNING, logger="eagle_eye")
    pub = Publisher(NatsSettings(servers=(f"nats://127.0.0.1:{port}",)))
    try:
        channel = pub.channel(IDENTITY)
        started = time.perf_counter()
        for i in range(100):
            channel.offer(sample(i))
        assert time.perf_counter() - started < 0.1  # offers never wait for the network
        assert wait_for(lambda: "NATS unreachable" in caplog.text, 5)
        with EmbeddedNats(port=port):
            assert pub.wait_connected(10)
            assert wait_for(lambda: pub.stats.sent >= 1, 5)
    finally:
        pub.close()
    warnings = [r for r in caplog.records if "NATS unreachable" in r.getMessage()]
    assert len(warnings) == 1  # one clear line, not a flood


async def test_publishing_resumes_after_a_nats_outage(
    nats_server: EmbeddedNats, publisher: Publisher
) -> None:
    channel = publisher.channel(IDENTITY)
    channel.offer(sample(1))
    assert await async_wait_for(lambda: publisher.stats.sent >= 1, 2)
    nats_server.stop()
    for i in range(50):
        channel.offer(sample(100 + i))  # must not raise or block while NATS is gone
    nats_server.start()
    c = Collector()
    await c.start(nats_server.url)
    assert await async_wait_for(
        lambda: c.latest() is not None and c.latest().running == 149,
        10,  # type: ignore[union-attr]
    )
    assert publisher.stats.connects >= 2
    assert c.client is not None
    await c.client.close()


async def test_token_auth_is_used() -> None:
    with EmbeddedNats(extra_args=("--auth", "s3cret")) as server:
        c = Collector()
        c.client = await nats.connect(server.url, token="s3cret")
        got: list[bytes] = []

        async def on_message(msg: object) -> None:
            got.append(msg.data)  # type: ignore[attr-defined]

        await c.client.subscribe(subjects.ROUTING_METRICS, cb=on_message)
        await c.client.flush()
        pub = Publisher(NatsSettings(servers=(server.url,), token="s3cret"))
        try:
            pub.channel(IDENTITY).offer(sample(1))
            assert await async_wait_for(lambda: bool(got), 3)
        finally:
            pub.close()
            await c.client.close()


def test_inert_publisher_accepts_samples_and_sends_nothing() -> None:
    pub = Publisher(None)
    channel = pub.channel(IDENTITY)
    channel.offer(sample(1))
    assert not pub.enabled and pub.stats.sent == 0
    assert channel.latest.running == 1
