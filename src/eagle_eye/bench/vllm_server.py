"""Real vLLM (CPU build) servers for benchmarks and tests: the tiny model and a handle.

``ensure_tiny_model`` writes the tiny random-weight model once per machine (with the vLLM
virtualenv's python, ``bench/tiny_model.py``), ``start_vllm_server`` starts
``vllm.entrypoints.openai.api_server`` with the environment /work/shared/TOOLS.md found
to work (local, quiet, offline) and waits for ``/health``, and ``VllmServer.stop`` always
ends the whole process tree (vLLM's API server was seen to ignore SIGTERM after a burst
of requests, and it has EngineCore children). ``scripts/vllm_env.sh`` builds the venv.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import http.client
import os
import shutil
import signal
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from prometheus_client.parser import text_string_to_metric_families

from eagle_eye.bench import tiny_model
from eagle_eye.bench.processes import free_tcp_port
from eagle_eye.children import own_process_group
from eagle_eye.errors import EagleEyeError

MODEL_SCRIPT = Path(tiny_model.__file__)
SERVED_MODEL_NAME = "tiny-llama"
MAX_MODEL_LEN = 256
START_TIMEOUT_S = 600.0
"""Start-up to /health: 26-42 s on 2 idle cores, up to 190 s seen on 2 busy ones."""
DISABLED_PLUGINS = "eagle_eye_plugins_disabled"
"""A ``VLLM_PLUGINS`` allow-list that names no installed plugin: vLLM loads none."""


class VllmServerError(EagleEyeError, RuntimeError):
    """vLLM (or the tiny model) could not be started; the message carries its log."""


def cache_root() -> Path:
    return Path(os.environ.get("EAGLE_EYE_CACHE_DIR", Path.home() / ".cache" / "eagle-eye"))


def ensure_tiny_model(vllm_python: str) -> Path:
    """The tiny model's directory, generated with the vLLM venv's python on first use.

    The directory name carries a hash of the generator, so changing it makes a new model;
    a lock and an atomic rename keep concurrent sessions from reading a half-written one.
    """
    digest = hashlib.sha256(MODEL_SCRIPT.read_bytes()).hexdigest()[:12]
    root = cache_root()
    root.mkdir(parents=True, exist_ok=True)
    target = root / f"tiny-llama-{digest}"
    if (target / "config.json").is_file():
        return target
    with open(root / "tiny-llama.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if (target / "config.json").is_file():
            return target
        partial = root / f"tiny-llama-{digest}.partial-{os.getpid()}"
        shutil.rmtree(partial, ignore_errors=True)
        done = subprocess.run(
            [vllm_python, str(MODEL_SCRIPT), str(partial)],
            capture_output=True,
            text=True,
            timeout=300,
            env={**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"},
            check=False,
        )
        if done.returncode != 0:
            shutil.rmtree(partial, ignore_errors=True)
            raise VllmServerError(f"tiny model generation failed:\n{done.stderr[-4000:]}")
        partial.rename(target)
    return target


def vllm_env(
    cache_dir: Path, extra: Mapping[str, str] | None = None, *, plugins: bool = True
) -> dict[str, str]:
    """Environment for a local, quiet, offline vLLM (see TOOLS.md), no inherited EAGLE_EYE_*."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("EAGLE_EYE_")}
    env.pop("VLLM_PLUGINS", None)
    env.update(
        VLLM_HOST_IP="127.0.0.1",
        VLLM_CACHE_ROOT=str(cache_dir),
        HF_HUB_OFFLINE="1",
        TRANSFORMERS_OFFLINE="1",
        VLLM_NO_USAGE_STATS="1",
        DO_NOT_TRACK="1",
        VLLM_CPU_KVCACHE_SPACE="1",
        PYTHONUNBUFFERED="1",
    )
    if not plugins:
        env["VLLM_PLUGINS"] = DISABLED_PLUGINS
    env.update(extra or {})
    return env


@dataclass
class VllmServer:
    """A running ``vllm.entrypoints.openai.api_server``; ``stop()`` ends its process tree."""

    proc: subprocess.Popen[bytes]
    port: int
    log_path: Path
    name: str
    started_s: float = 0.0
    """Seconds from spawn to /health 200."""
    _stopped: bool = field(default=False, repr=False)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def log_text(self) -> str:
        return self.log_path.read_text(errors="replace")

    def get(self, path: str, timeout_s: float = 10.0) -> tuple[int, bytes]:
        try:
            with urllib.request.urlopen(self.url + path, timeout=timeout_s) as response:
                return response.status, response.read()
        except urllib.error.HTTPError as exc:
            return exc.code, exc.read()

    def api_server_cpu_s(self) -> float:
        """CPU time (user + system, all threads) of the API server process so far: where
        vLLM's stat loggers, and so our plugin and its sender thread, run. The engine
        core and its workers are child processes and not counted."""
        fields = Path(f"/proc/{self.proc.pid}/stat").read_text().rsplit(")", 1)[1].split()
        utime, stime = int(fields[11]), int(fields[12])  # fields 14 and 15 of stat(5)
        return (utime + stime) / os.sysconf("SC_CLK_TCK")

    def metrics(self) -> dict[str, float]:
        """vLLM's own /metrics: sample name -> value summed over label sets."""
        status, body = self.get("/metrics")
        assert status == 200, body[:200]
        values: dict[str, float] = {}
        for family in text_string_to_metric_families(body.decode()):
            for sample in family.samples:
                values[sample.name] = values.get(sample.name, 0.0) + sample.value
        return values

    def wait_healthy(self, timeout_s: float = START_TIMEOUT_S) -> None:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise VllmServerError(
                    f"vLLM server {self.name} exited with {self.proc.returncode}:\n"
                    + self.log_text()[-6000:]
                )
            # Not listening yet (polling a port in the ephemeral range can even connect
            # to itself and read back its own request: a bad status line).
            with contextlib.suppress(OSError, http.client.HTTPException):
                if self.get("/health", timeout_s=2.0)[0] == 200:
                    return
            time.sleep(0.25)  # polling a child process's readiness, not synchronising
        self.stop()
        raise VllmServerError(
            f"vLLM server {self.name} not healthy within {timeout_s}s:\n" + self.log_text()[-6000:]
        )

    def pause(self) -> None:
        """SIGSTOP the whole server (API server and engine), so that nothing of it runs
        while another server is measured on the same cores; ``resume`` undoes it."""
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.proc.pid, signal.SIGSTOP)

    def resume(self) -> None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.proc.pid, signal.SIGCONT)

    def stop(self, timeout_s: float = 20.0) -> None:
        """TERM the process group, wait, then KILL the group and every descendant by PID."""
        if self._stopped:
            return
        self._stopped = True
        self.resume()  # a paused server would not see the TERM
        descendants = _descendants(self.proc.pid)
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.proc.pid, signal.SIGTERM)
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.proc.wait(timeout_s)
        descendants |= _descendants(self.proc.pid)
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.proc.pid, signal.SIGKILL)
        for pid in descendants:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGKILL)
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.proc.wait(10)


def _descendants(pid: int) -> set[int]:
    """PIDs below ``pid`` (from /proc), so children that left the group die too."""
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                stat = f.read()
        except OSError:
            continue
        ppid = int(stat.rsplit(")", 1)[1].split()[1])
        children.setdefault(ppid, []).append(int(entry))
    found: set[int] = set()
    todo = [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            if child not in found:
                found.add(child)
                todo.append(child)
    return found


def start_vllm_server(
    vllm_python: str,
    model_dir: Path,
    work_dir: Path,
    *,
    name: str = "vllm",
    env: Mapping[str, str] | None = None,
    plugins: bool = True,
    extra_args: Sequence[str] = (),
    timeout_s: float = START_TIMEOUT_S,
) -> VllmServer:
    """Start vLLM's OpenAI server on a free loopback port and wait until /health is 200.

    ``plugins=False`` sets vLLM's ``VLLM_PLUGINS`` allow-list to a name no plugin has, so
    Eagle Eye's stat logger is not loaded (a plain vLLM, for baselines). ``env`` adds
    variables (``EAGLE_EYE_*``). Output goes to ``work_dir/<name>.log``.
    """
    work_dir.mkdir(parents=True, exist_ok=True)
    port = free_tcp_port()
    log_path = work_dir / f"{name}-{port}.log"
    args = [
        vllm_python,
        "-m",
        "vllm.entrypoints.openai.api_server",
        "--model",
        str(model_dir),
        "--served-model-name",
        SERVED_MODEL_NAME,
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        "--max-model-len",
        str(MAX_MODEL_LEN),
        *extra_args,
    ]
    cache_dir = work_dir / "vllm-cache"
    with open(log_path, "wb") as log:
        proc = subprocess.Popen(
            args,
            stdout=log,
            stderr=subprocess.STDOUT,
            env=vllm_env(cache_dir, env, plugins=plugins),
            cwd=work_dir,
            **own_process_group(),  # not a new session: see eagle_eye.children
        )
    server = VllmServer(proc=proc, port=port, log_path=log_path, name=name)
    begin = time.monotonic()
    try:
        server.wait_healthy(timeout_s)
    except BaseException:
        server.stop()
        raise
    server.started_s = time.monotonic() - begin
    return server
