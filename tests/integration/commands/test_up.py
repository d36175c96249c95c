"""``eagle-eye up`` as a user runs it: a child process, its printed URLs, Ctrl-C."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import threading

import aiohttp
import pytest

from eagle_eye.children import own_process_group
from support import async_wait_for, wait_for


def start_up() -> subprocess.Popen[bytes]:
    """``eagle-eye up`` in its own process group (so Ctrl-C can go to that group)."""
    cli = "from eagle_eye.cli import main; main()"
    return subprocess.Popen(
        [sys.executable, "-c", cli, "up", "--port", "0", "--engines", "2"],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        **own_process_group(),
        env={**os.environ, "EAGLE_EYE_LOG_LEVEL": "WARNING"},
    )


@pytest.mark.slow
async def test_up_serves_the_printed_examples_and_stops_cleanly_on_ctrl_c() -> None:
    proc = start_up()
    lines: list[str] = []

    def pump() -> None:
        assert proc.stdout is not None
        for raw in proc.stdout:
            lines.append(raw.decode(errors="replace"))

    reader = threading.Thread(target=pump, daemon=True)
    reader.start()
    try:
        assert wait_for(lambda: any("Ctrl-C stops" in line for line in lines), 60.0), lines
        output = "".join(lines)
        base = re.search(r"router \(OpenAI API\)\s+(http://\S+)/v1", output)
        assert base is not None, output
        url = base.group(1)
        assert "curl -X POST " + url + "/generate" in output
        assert "OpenAI(base_url='" + url + "/v1'" in output
        assert "(speed x0.5)" in output
        async with aiohttp.ClientSession() as session:

            async def ready() -> bool:
                async with session.get(url + "/ready") as resp:
                    return resp.status == 200

            assert await async_wait_for(ready, 10.0)
            async with session.post(url + "/generate", data=b'{"prompt": "Hello AI"}') as resp:
                assert resp.status == 200
                assert (await resp.json())["text"][0].startswith("Hello AI")
            async with session.get(url + "/dashboard/") as resp:
                assert resp.status in (200, 404)  # 404 only when the dashboard is absent
        os.killpg(proc.pid, signal.SIGINT)
        assert proc.wait(20) == 0
        assert wait_for(lambda: any("Stopped." in line for line in lines), 5.0), lines
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGTERM)
            try:
                proc.wait(5)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait(5)
        reader.join(5)
        assert proc.stdout is not None
        proc.stdout.close()
