"""Child processes of the benchmarks (peer routers, simulated fleets, load generators)."""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
from typing import Any


def stop_process_group(proc: subprocess.Popen[Any], timeout_s: float) -> None:
    """TERM the process group ``proc`` leads (see ``eagle_eye.children``), then KILL it
    if it is still there after ``timeout_s``: peers such as the Rust routers or vLLM
    leave children behind otherwise, and a benchmark must never hang on exit."""
    if proc.poll() is not None:
        return
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGTERM)
    try:
        proc.wait(timeout_s)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout_s)


def free_tcp_port(host: str = "127.0.0.1") -> int:
    """A port the kernel just handed out, for child processes that cannot take port 0."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        port: int = sock.getsockname()[1]
        return port
