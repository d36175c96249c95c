"""The agent's test harness: a NATS collector, a fake engine page server, agent start/stop.

Shared by the agent's integration tests and the real-vLLM agent test.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import nats
from nats.aio.client import Client

from eagle_eye import subjects
from eagle_eye.publish.agent.config import AgentConfig, EngineTarget
from eagle_eye.publish.agent.runner import Agent
from eagle_eye.publish.publisher import Publisher
from eagle_eye.settings import NatsSettings
from eagle_eye.snapshot import Snapshot, decode


class Collector:
    """Subscribes to every snapshot subject and keeps what arrives, decoded."""

    def __init__(self) -> None:
        self.snapshots: list[Snapshot] = []
        self.client: Client | None = None

    async def start(self, url: str) -> None:
        self.client = await nats.connect(url)

        async def on_message(msg: Any) -> None:
            self.snapshots.append(decode(msg.data))

        for subject in subjects.consumer_subjects():
            await self.client.subscribe(subject, cb=on_message)
        await self.client.flush()

    def latest(self, instance_id: str | None = None, dp_rank: int = 0) -> Snapshot | None:
        for snap in reversed(self.snapshots):
            if instance_id is None or (snap.instance_id == instance_id and snap.dp_rank == dp_rank):
                return snap
        return None

    def instances(self) -> set[str]:
        return {s.instance_id for s in self.snapshots}


class PageServer:
    """A real HTTP server on 127.0.0.1 serving ``body`` on every path it is given.

    ``stop()`` closes the socket (the engine is down); ``start()`` binds the same port
    again. ``declared_length`` lets a test lie about Content-Length (a truncated page).
    """

    def __init__(self) -> None:
        self.pages: dict[str, bytes] = {}
        self.status = 200
        self.declared_length: int | None = None
        self.requests = 0
        self.port = 0
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None
        self._connections: set[socket.socket] = set()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> PageServer:
        owner = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def setup(self) -> None:
                super().setup()
                # Headers and body go out in two writes; without this, Nagle plus the
                # client's delayed ACK add ~40 ms to every keep-alive response.
                self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
                owner._connections.add(self.connection)

            def finish(self) -> None:
                owner._connections.discard(self.connection)
                super().finish()

            def do_GET(self) -> None:
                owner.requests += 1
                body = owner.pages.get(self.path)
                status = owner.status if body is not None else 404
                body = body if body is not None else b"not found\n"
                self.send_response(status)
                self.send_header("Content-Type", "text/plain; version=0.0.4")
                length = owner.declared_length or len(body)
                self.send_header("Content-Length", str(length))
                if owner.declared_length:
                    self.send_header("Connection", "close")
                self.end_headers()
                self.wfile.write(body)
                if owner.declared_length:
                    self.close_connection = True

            def log_message(self, *_args: object) -> None:
                pass

        server = ThreadingHTTPServer(("127.0.0.1", self.port), Handler)
        server.daemon_threads = True
        self.port = server.server_address[1]
        self._server = server
        self._thread = threading.Thread(target=server.serve_forever, daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        """Like a crashed engine: stop listening and drop every open connection."""
        server, self._server = self._server, None
        if server is not None:
            server.shutdown()
            server.server_close()
        for conn in list(self._connections):
            with contextlib.suppress(OSError):
                conn.shutdown(socket.SHUT_RDWR)
        if self._thread is not None:
            self._thread.join(5)


def start_agent(
    nats_url: str, targets: list[EngineTarget], config: AgentConfig | None = None
) -> Agent:
    publisher = Publisher(
        NatsSettings(servers=(nats_url,)), heartbeat_s=1.0, client_name="eagle-eye-agent-test"
    )
    assert publisher.wait_connected(5.0)
    return Agent(targets, publisher, config or AgentConfig(interval_s=0.05)).start()


async def stop_agent(agent: Agent) -> None:
    await asyncio.to_thread(agent.stop)
