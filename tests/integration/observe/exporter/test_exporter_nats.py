"""``eagle-eye exporter`` against a real nats-server: snapshots in, /metrics out."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import urllib.request
from pathlib import Path

import aiohttp
import nats

from eagle_eye import subjects
from eagle_eye.observe.exporter.cli import Exporter
from eagle_eye.settings import nats_from_env
from eagle_eye.snapshot import Snapshot, encode
from support import NOT_LISTENING_YET, async_wait_for, free_tcp_port, wait_for

EAGLE_EYE = [sys.executable, "-c", "from eagle_eye.cli import main; main()"]


def _snap(instance: str, seq: int, waiting: int) -> bytes:
    return encode(
        Snapshot(
            instance_id=instance,
            model="llama",
            engine="vllm",
            seq=seq,
            timestamp_s=1_700_000_000.0 + seq,
            waiting=waiting,
        )
    )


async def _metrics(port: int) -> str:
    async with (
        aiohttp.ClientSession() as session,
        session.get(f"http://127.0.0.1:{port}/metrics") as resp,
    ):
        assert resp.status == 200
        return await resp.text()


async def test_snapshots_on_both_subjects_become_series(nats_url: str) -> None:
    settings = nats_from_env({}, nats_url)
    assert settings is not None
    exporter = await Exporter(settings, port=0).start(wait_for_nats_s=5.0)
    nc = await nats.connect(nats_url)
    try:
        await nc.publish(subjects.ROUTING_METRICS, _snap("flat-0", 1, waiting=4))
        await nc.publish(f"{subjects.ROUTING_METRICS}.llama.hier-0", _snap("hier-0", 1, 9))
        await nc.flush()

        async def both_seen() -> bool:
            text = await _metrics(exporter.port)
            return 'instance_id="flat-0"' in text and 'instance_id="hier-0"' in text

        assert await async_wait_for(both_seen, timeout_s=10)
        text = await _metrics(exporter.port)
        assert (
            'eagle_eye_requests_waiting{dp_rank="0",engine_kind="vllm",instance_id="hier-0",'
            'model_name="llama"} 9.0'
        ) in text
        assert 'eagle_eye_model_ready_instances{model_name="llama"} 2.0' in text
        assert "eagle_eye_exporter_nats_connected 1.0" in text
        assert "eagle_eye_snapshot_age_seconds{" in text
    finally:
        await nc.close()
        await exporter.close()


async def test_a_late_exporter_asks_publishers_to_resend(nats_url: str) -> None:
    """The exporter's SYNC on start means it need not be up before the engines."""
    nc = await nats.connect(nats_url)
    answered = 0

    async def on_sync(_msg: object) -> None:
        nonlocal answered
        answered += 1
        await nc.publish(subjects.ROUTING_METRICS, _snap("early-0", 5, waiting=1))

    await nc.subscribe(subjects.SYNC, cb=on_sync)
    await nc.flush()
    settings = nats_from_env({}, nats_url)
    assert settings is not None
    exporter = await Exporter(settings, port=0).start(wait_for_nats_s=5.0)
    try:

        async def seen() -> bool:
            return 'instance_id="early-0"' in await _metrics(exporter.port)

        assert await async_wait_for(seen, timeout_s=10)
        assert answered >= 1
    finally:
        await nc.close()
        await exporter.close()


def test_the_cli_serves_metrics_and_stops_on_sigterm(nats_url: str, tmp_path: Path) -> None:
    port = free_tcp_port()
    log = (tmp_path / "exporter.log").open("wb")
    proc = subprocess.Popen(
        [*EAGLE_EYE, "exporter", "--nats", nats_url, "--port", str(port)],
        stdout=log,
        stderr=subprocess.STDOUT,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )
    try:

        def up() -> bool:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=1) as r:
                    return b"eagle_eye_exporter_nats_connected" in r.read()
            except NOT_LISTENING_YET:
                return False

        assert wait_for(up, timeout_s=20, interval_s=0.1), (tmp_path / "exporter.log").read_text()
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=15) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(timeout=5)
        log.close()
