"""``eagle-eye agent`` as an operator runs it: a child process, SIGTERM to stop."""

from __future__ import annotations

import asyncio
import signal
import sys

from eagle_eye.snapshot import EngineState
from support import FIXTURES, async_wait_for
from support.agent import Collector, PageServer


async def test_sidecar_command_advertises_the_pod_address_and_stops_cleanly(
    nats_url: str, collector: Collector, page_server: PageServer
) -> None:
    page_server.pages["/metrics"] = (FIXTURES / "sglang_dp2_tp2.txt").read_bytes()
    proc = await asyncio.create_subprocess_exec(
        *[
            sys.executable,
            "-c",
            "from eagle_eye.cli import main; main()",
            "agent",
            "--engine",
            page_server.url,
            "--nats",
            nats_url,
            "--interval",
            "0.05",
            "--advertise",
            "http://10.1.2.3:30000",
            "--instance-id",
            "sglang-pod-a",
        ],
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT,
    )
    try:

        def both_ranks() -> bool:
            ranks = {s.dp_rank for s in collector.snapshots if s.state is EngineState.READY}
            return ranks == {0, 1}

        assert await async_wait_for(both_ranks, 20)
        rank1 = collector.latest("sglang-pod-a", dp_rank=1)
        assert rank1 is not None
        assert (rank1.engine, rank1.endpoint, rank1.model) == (
            "sglang",
            "http://10.1.2.3:30000",
            "qwen",
        )
        assert (rank1.running, rank1.waiting, rank1.kv_usage) == (9, 7, 0.75)
        proc.send_signal(signal.SIGTERM)
        out, _ = await asyncio.wait_for(proc.communicate(), 15)
        assert proc.returncode == 0
    finally:
        if proc.returncode is None:
            proc.kill()
            await asyncio.wait_for(proc.communicate(), 5)
    output = out.decode(errors="replace")
    assert "watching" in output

    def stopped() -> bool:
        last = collector.latest("sglang-pod-a", dp_rank=0)
        return last is not None and last.state is EngineState.STOPPING

    assert await async_wait_for(stopped, 5)
