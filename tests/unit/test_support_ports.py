"""The test harness's port blocks stay out of the kernel's ephemeral range."""

from __future__ import annotations

import socket

from support import _ephemeral_ports, free_tcp_port_block


def test_a_port_block_is_free_and_below_the_ephemeral_range() -> None:
    first = free_tcp_port_block(3)
    assert first + 2 < _ephemeral_ports().start  # no outgoing connection can take these
    socks = [socket.socket(socket.AF_INET, socket.SOCK_STREAM) for _ in range(3)]
    try:
        for offset, sock in enumerate(socks):
            sock.bind(("127.0.0.1", first + offset))
    finally:
        for sock in socks:
            sock.close()
