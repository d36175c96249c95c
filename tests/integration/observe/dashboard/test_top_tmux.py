"""``eagle-eye top`` in a real terminal (tmux): it fills from NATS, sorts on keys, quits."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from dashboard_harness import LiveFleet, PublishedFleet
from terminal_png import render_capture

from support import wait_for

pytestmark = pytest.mark.skipif(shutil.which("tmux") is None, reason="needs tmux")

EAGLE_EYE = str(Path(sys.executable).parent / "eagle-eye")
SCREENSHOT_DIR_ENV = "EAGLE_EYE_SCREENSHOT_DIR"


class Tmux:
    """A private tmux server (its own socket), so nothing else's sessions are touched."""

    def __init__(self, name: str) -> None:
        self.socket = name
        self.env = {**os.environ, "LANG": "C.UTF-8", "TERM": "xterm-256color"}

    def run(self, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            ["tmux", "-L", self.socket, "-f", "/dev/null", *args],
            capture_output=True,
            text=True,
            check=check,
            env=self.env,
            timeout=10,
        )

    def capture(self, *, colours: bool = False) -> str:
        # -N keeps trailing spaces, so full-width bars keep their background colour.
        args = ["capture-pane", "-p", "-t", "top"] + (["-e", "-N"] if colours else [])
        return self.run(*args, check=False).stdout

    def alive(self) -> bool:
        return self.run("has-session", "-t", "top", check=False).returncode == 0

    def kill(self) -> None:
        self.run("kill-server", check=False)


@pytest.fixture
def published(nats_url: str) -> Iterator[PublishedFleet]:
    fleet = PublishedFleet(nats_url, instances=3)
    try:
        yield fleet
    finally:
        fleet.close()


@pytest.fixture
def tmux() -> Iterator[Tmux]:
    t = Tmux(f"eagle-eye-top-test-{os.getpid()}")
    try:
        yield t
    finally:
        t.kill()


def table(screen: str) -> list[str]:
    """Instance names in screen order (the table rows under the header)."""
    lines = screen.splitlines()
    header = next((i for i, line in enumerate(lines) if line.startswith("INSTANCE")), None)
    if header is None:
        return []
    return [line.split()[0] for line in lines[header + 1 :] if line.startswith("engine-")]


def test_top_fills_from_nats_sorts_on_keys_and_quits(
    nats_url: str, published: PublishedFleet, tmux: Tmux, tmp_path: Path
) -> None:
    published.set_load(0, running=2, waiting=0, kv_usage=0.25)
    published.set_load(1, running=8, waiting=6, kv_usage=0.93)
    published.set_load(2, running=5, waiting=1, kv_usage=0.55)
    command = f"{EAGLE_EYE} top --nats {nats_url} --interval 0.2"
    tmux.run("new-session", "-d", "-s", "top", "-x", "132", "-y", "24", command)

    assert wait_for(lambda: len(table(tmux.capture())) == 3, timeout_s=15)
    screen = tmux.capture()
    assert "(connected)" in screen.splitlines()[0]
    assert "3/3 ready" in screen and "Running 15" in screen and "Waiting 7" in screen
    assert table(screen) == ["engine-0", "engine-1", "engine-2"]  # by instance, A-Z

    tmux.run("send-keys", "-t", "top", "w")  # sort by waiting, longest queue first
    assert wait_for(lambda: "WAIT▼" in tmux.capture(), timeout_s=5)
    assert table(tmux.capture()) == ["engine-1", "engine-2", "engine-0"]

    published.set_load(0, running=12, waiting=9, kv_usage=0.99)  # load moves to engine-0
    assert wait_for(lambda: table(tmux.capture())[0] == "engine-0", timeout_s=5)
    assert "Waiting 16" in tmux.capture()

    tmux.run("send-keys", "-t", "top", "I")  # invert: shortest queue first
    assert wait_for(lambda: table(tmux.capture())[0] == "engine-2", timeout_s=5)
    tmux.run("send-keys", "-t", "top", "k")  # KV cache, fullest first
    assert wait_for(lambda: "KV%▼" in tmux.capture(), timeout_s=5)
    assert table(tmux.capture()) == ["engine-0", "engine-1", "engine-2"]

    tmux.run("send-keys", "-t", "top", "q")
    assert wait_for(lambda: not tmux.alive(), timeout_s=10)


def test_top_follows_a_simulated_fleet_under_load(
    nats_url: str, tmux: Tmux, tmp_path: Path
) -> None:
    fleet = LiveFleet(nats_url, engines=4, speed_factors=[1.0, 1.0, 1.0, 0.4]).start()
    try:
        command = f"{EAGLE_EYE} top --nats {nats_url} --interval 0.25"
        tmux.run("new-session", "-d", "-s", "top", "-x", "132", "-y", "22", command)
        assert wait_for(lambda: len(sim_rows(tmux.capture())) == 4, timeout_s=15)
        assert all(row[3] == "0" for row in sim_rows(tmux.capture()))  # RUN: idle

        load = fleet.submit(fleet.load(requests=400, concurrency=48, max_tokens=96))
        tmux.run("send-keys", "-t", "top", "r")  # busiest first
        assert wait_for(
            lambda: sum(int(row[3]) for row in sim_rows(tmux.capture())) >= 8, timeout_s=20
        )
        rows = sim_rows(tmux.capture())
        assert any(row[6] not in ("-", "0") for row in rows)  # TOK/S
        shot = tmp_path / "top.png"
        render_capture(tmux.capture(colours=True), shot)
        assert shot.stat().st_size > 10_000
        keep(shot)
        assert load.result(timeout=90) == 400
    finally:
        fleet.stop()


def sim_rows(screen: str) -> list[list[str]]:
    """The table rows of simulated engines, split into columns."""
    lines = screen.splitlines()
    header = next((i for i, line in enumerate(lines) if line.startswith("INSTANCE")), None)
    if header is None:
        return []
    return [line.split() for line in lines[header + 1 :] if line.startswith("sim-")]


def keep(path: Path) -> None:
    folder = os.environ.get(SCREENSHOT_DIR_ENV)
    if folder:
        Path(folder).mkdir(parents=True, exist_ok=True)
        shutil.copy(path, Path(folder) / path.name)
