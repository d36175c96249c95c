"""``eagle-eye sim`` as operators run it: a child process, consecutive ports, Ctrl-C."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import urllib.request

from support import NOT_LISTENING_YET, free_tcp_port_block, wait_for


def _get(url: str) -> int:
    try:
        with urllib.request.urlopen(url, timeout=2) as r:
            return int(r.status)
    except NOT_LISTENING_YET:
        return 0


def test_cli_serves_consecutive_ports_and_stops_cleanly_on_ctrl_c() -> None:
    base = free_tcp_port_block(2)
    proc = subprocess.Popen(
        [sys.executable, "-c", "from eagle_eye.cli import main; main()", "sim",
         "--engines", "2", "--base-port", str(base), "--speedup", "20",
         "--speed-factors", "1,0.5"],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
    )  # fmt: skip
    out = ""
    try:
        healthy = wait_for(lambda: _get(f"http://127.0.0.1:{base + 1}/health") == 200, 20.0)
        if not healthy:
            proc.kill()
            out = proc.communicate(timeout=10)[0].decode()
        assert healthy, f"engines never served /health; exit {proc.poll()}, output:\n{out}"
        request = urllib.request.Request(
            f"http://127.0.0.1:{base}/generate",
            data=json.dumps({"prompt": "Hello AI"}).encode(),
            headers={"Content-Type": "application/json"},
        )
        with urllib.request.urlopen(request, timeout=10) as r:
            assert json.loads(r.read())["text"][0].startswith("Hello AI")
        proc.send_signal(signal.SIGINT)
        assert proc.wait(10) == 0
    finally:
        if proc.poll() is None:
            proc.terminate()
            try:
                proc.wait(5)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(5)
        if proc.stdout is not None and not proc.stdout.closed:
            out = proc.stdout.read().decode()
            proc.stdout.close()
    assert f"sim-0: http://127.0.0.1:{base}" in out
    assert f"sim-1: http://127.0.0.1:{base + 1}" in out
