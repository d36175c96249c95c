"""The agent's threads: one ``EngineWatcher`` per engine, all feeding one publisher.

``Agent`` runs each watcher's ``poll_once`` on its own thread at a fixed rate, and on
``stop()`` joins them, closes the fetchers and closes the publisher (which sends
``stopping`` for every channel). ``eagle-eye agent`` (``cli.py``) and the tests use it.
"""

from __future__ import annotations

import logging
import threading
import time

from eagle_eye.publish.agent.config import AgentConfig, EngineTarget
from eagle_eye.publish.agent.watcher import EngineWatcher
from eagle_eye.publish.publisher import Publisher

log = logging.getLogger("eagle_eye.agent")


class Agent:
    """Watch several engines, one thread each, through one publisher."""

    def __init__(
        self, targets: list[EngineTarget], publisher: Publisher, config: AgentConfig
    ) -> None:
        if not targets:
            raise ValueError("the agent needs at least one engine to watch")
        self.publisher = publisher
        self.config = config
        self.watchers = [EngineWatcher(t, publisher, config) for t in targets]
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []

    def start(self) -> Agent:
        for i, watcher in enumerate(self.watchers):
            thread = threading.Thread(
                target=self._loop, args=(watcher,), name=f"eagle-eye-agent-{i}", daemon=True
            )
            thread.start()
            self._threads.append(thread)
        return self

    def _loop(self, watcher: EngineWatcher) -> None:
        next_due = time.monotonic()
        while not self._stop.is_set():
            try:
                delay_s = watcher.poll_once()
            except Exception:  # a bug must not silently stop watching an engine
                log.exception("agent: unexpected error watching %s", watcher.target.url)
                delay_s = self.config.max_backoff_s
            # Fixed-rate schedule: no drift from the scrape's own duration; if a scrape
            # overran, start the next one right away rather than bunching up.
            next_due = max(next_due + delay_s, time.monotonic())
            self._stop.wait(max(0.0, next_due - time.monotonic()))

    def request_stop(self) -> None:
        """Ask the loops to end (safe from a signal handler); ``stop()`` finishes up."""
        self._stop.set()

    def wait(self, timeout_s: float | None = None) -> bool:
        """Block until ``stop()`` is called (or ``timeout_s`` passes)."""
        return self._stop.wait(timeout_s)

    def stop(self, timeout_s: float = 3.0) -> None:
        """Stop the threads, send ``stopping`` for every channel, close the publisher."""
        self._stop.set()
        for thread in self._threads:
            thread.join(timeout_s)
        for watcher in self.watchers:
            watcher.close()
        self.publisher.close(timeout_s=timeout_s)

    def __enter__(self) -> Agent:
        return self.start()

    def __exit__(self, *_exc: object) -> None:
        self.stop()
