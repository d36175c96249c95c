"""``eagle-eye watch`` against a real nats-server and a real ``Publisher``."""

from __future__ import annotations

import asyncio
import io
import json
import os
import subprocess
import sys
from collections.abc import Iterator

import nats
import pytest

from eagle_eye import subjects
from eagle_eye.observe.watch import FleetTable, WatchOptions, render_table, run_watch
from eagle_eye.publish.channel import InstanceIdentity, Sample
from eagle_eye.publish.publisher import Publisher
from eagle_eye.settings import NatsSettings, nats_from_env
from support import free_tcp_port, wait_for

# Long heartbeat: the only way a late watcher sees state quickly is the SYNC it sends.
_SLOW_HEARTBEAT_S = 60.0
_CLI = [sys.executable, "-c", "from eagle_eye.cli import main; main()"]


def _settings(url: str) -> NatsSettings:
    settings = nats_from_env({}, url=url)
    assert settings is not None
    return settings


@pytest.fixture
def publisher(nats_url: str) -> Iterator[Publisher]:
    pub = Publisher(_settings(nats_url), heartbeat_s=_SLOW_HEARTBEAT_S)
    assert pub.wait_connected(5.0)
    yield pub
    pub.close()


def _identity(instance_id: str, dp_rank: int = 0) -> InstanceIdentity:
    return InstanceIdentity(
        instance_id=instance_id,
        model="tiny-llama",
        engine="vllm",
        endpoint="http://127.0.0.1:8000",
        dp_rank=dp_rank,
    )


def _publish_and_settle(publisher: Publisher, instance_id: str, dp_rank: int, sample: Sample):
    channel = publisher.channel(_identity(instance_id, dp_rank))
    # Read before the offer: the sender may send it before this thread runs again.
    sent_before = publisher.stats.sent
    channel.offer(sample)
    # The sample has gone out before the watcher exists, so only SYNC can bring it back.
    assert wait_for(lambda: publisher.stats.sent > sent_before and not channel._unsent, 5.0)
    return channel


async def test_late_watcher_gets_current_state_as_json_lines_via_sync(
    publisher: Publisher, nats_url: str
) -> None:
    _publish_and_settle(publisher, "engine-a", 0, Sample(running=7, waiting=3, kv_usage=0.25))
    out = io.StringIO()
    options = WatchOptions(nats=_settings(nats_url), as_json=True, count=1)

    table = await asyncio.wait_for(run_watch(options, out), 1.0)

    line = json.loads(out.getvalue().splitlines()[0])
    assert line["subject"] == subjects.ROUTING_METRICS
    assert (line["instance_id"], line["running"], line["waiting"]) == ("engine-a", 7, 3)
    assert line["kv_usage"] == 0.25
    assert table.invalid == 0


async def test_table_shows_every_rank_on_flat_and_hierarchical_subjects(nats_url: str) -> None:
    flat = Publisher(_settings(nats_url), heartbeat_s=_SLOW_HEARTBEAT_S)
    tree = Publisher(
        _settings(nats_url),
        heartbeat_s=_SLOW_HEARTBEAT_S,
        subject_mode=subjects.SubjectMode.HIERARCHICAL,
    )
    try:
        assert flat.wait_connected(5.0) and tree.wait_connected(5.0)
        _publish_and_settle(flat, "engine-a", 0, Sample(running=1, kv_usage=0.5))
        _publish_and_settle(tree, "engine-b", 1, Sample(waiting=4, kv_usage=0.125))
        out = io.StringIO()
        options = WatchOptions(nats=_settings(nats_url), count=2, interval_s=0.05)

        table = await asyncio.wait_for(run_watch(options, out), 2.0)
    finally:
        flat.close()
        tree.close()

    assert set(table.latest) == {("engine-a", 0), ("engine-b", 1)}
    text = out.getvalue()
    assert "INSTANCE" in text.splitlines()[0]
    row_b = next(line for line in text.splitlines() if line.startswith("engine-b"))
    assert row_b.split()[:7] == ["engine-b", "1", "tiny-llama", "ready", "0", "4", "12.5"]


async def test_invalid_messages_are_counted_and_skipped(nats_url: str) -> None:
    out = io.StringIO()
    options = WatchOptions(nats=_settings(nats_url), as_json=True, count=1)
    nc = await nats.connect(nats_url)
    sync = await nc.subscribe(subjects.SYNC)
    await nc.flush()
    watcher = asyncio.ensure_future(run_watch(options, out))
    try:
        # The watcher sends SYNC once it has subscribed: then it cannot miss what follows.
        await sync.next_msg(timeout=2.0)
        await nc.publish(subjects.ROUTING_METRICS, b'{"v":"1.0","seq":-1}')
        await nc.publish(subjects.ROUTING_METRICS, b"not json")
        valid = {"v": "1.0", "instance_id": "x", "model": "m", "engine": "sim"}
        valid |= {"seq": 1, "timestamp_s": 1.0}
        await nc.publish(subjects.ROUTING_METRICS, json.dumps(valid).encode())
        table = await asyncio.wait_for(watcher, 2.0)
    finally:
        await nc.close()

    assert (table.received, table.invalid) == (3, 2)
    assert json.loads(out.getvalue())["instance_id"] == "x"


def test_render_table_marks_an_empty_fleet_and_invalid_messages() -> None:
    table = FleetTable()
    assert table.add(b"[]", received_s=0.0) is None
    text = render_table(table, now_s=1.0)
    assert "(no instances yet" in text
    assert "1 invalid (last: payload: expected a JSON object, got list)" in text


def test_cli_prints_json_lines(publisher: Publisher, nats_url: str) -> None:
    _publish_and_settle(publisher, "engine-cli", 0, Sample(running=2))
    done = subprocess.run(
        [*_CLI, "watch", "--nats", nats_url, "--json", "--count", "1"],
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    line = json.loads(done.stdout.splitlines()[0])
    assert (line["instance_id"], line["running"], line["engine"]) == ("engine-cli", 2, "vllm")


def test_cli_without_a_url_starts_an_embedded_nats_and_says_so() -> None:
    env = {k: v for k, v in os.environ.items() if k != "EAGLE_EYE_NATS_URL"}
    done = subprocess.run(
        [*_CLI, "watch", "--duration", "0.3", "--interval", "0.1"],
        capture_output=True,
        text=True,
        timeout=30,
        env=env,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert "started an embedded NATS at nats://127.0.0.1:" in done.stderr
    assert "(no instances yet" in done.stdout


def test_cli_reports_unreachable_nats_in_one_line_and_exits_after_duration() -> None:
    url = f"nats://127.0.0.1:{free_tcp_port()}"
    done = subprocess.run(
        [*_CLI, "watch", "--nats", url, "--duration", "1.5"],
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )
    assert done.returncode == 1
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    assert "Traceback" not in done.stderr
    assert lines[-1] == f"Error: no NATS reachable at {url} within --duration 1.5s"
    assert len(lines) == 2, done.stderr  # the first failed attempt, then the verdict
    assert url in lines[0]


def test_cli_rejects_a_malformed_url() -> None:
    done = subprocess.run(
        [*_CLI, "watch", "--nats", "http://nats:4222"],
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )
    assert done.returncode == 2
    assert "is not a NATS URL" in done.stderr
