"""A slow client is cut off: each request must arrive whole within the server's deadline, over
real sockets to uvicorn running the API's own protocol (a short deadline here)."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator

import pytest
import uvicorn

from agent_harness.api.context import ApiContext
from agent_harness.api.deadline import DeadlinedH11
from agent_harness.store.database import Store
from tests.api.conftest import TOKEN, client_for

pytestmark = pytest.mark.integration


class _Quick(DeadlinedH11):
    deadline_s = 0.5


@pytest.fixture
def port(api_store: Store) -> Iterator[int]:
    app = client_for(ApiContext(store=api_store, mode="monitoring")).app
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        free = probe.getsockname()[1]
    config = uvicorn.Config(app, host="127.0.0.1", port=free, http=_Quick, log_level="error")
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 20
    while not server.started:
        assert time.monotonic() < deadline, "the server never started"
        time.sleep(0.01)
    yield free
    server.should_exit = True
    thread.join(10)


def _closed_by_server(conn: socket.socket) -> bool:
    """Whether the server closes the connection: it is read to its end (a server that holds
    it never ends the read, and the socket's own timeout fails the test)."""
    conn.settimeout(30)
    while conn.recv(4096):
        pass
    return True


def _request(port: int) -> bytes:
    with socket.create_connection(("127.0.0.1", port)) as conn:
        ask = f"GET /api/summary HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {TOKEN}\r\n"
        conn.sendall(ask.encode() + b"Connection: close\r\n\r\n")
        conn.settimeout(30)
        return b"".join(iter(lambda: conn.recv(4096), b""))


def test_a_client_that_never_finishes_its_request_is_cut_off_and_others_are_served(
    port: int,
) -> None:
    silent = socket.create_connection(("127.0.0.1", port))  # sends nothing at all
    dripping = socket.create_connection(("127.0.0.1", port))
    dripping.sendall(b"GET /api/summary HTTP/1.1\r\nHost: x\r\nX-Slow: ")
    body_never_sent = socket.create_connection(("127.0.0.1", port))
    body_never_sent.sendall(
        f"POST /api/plan/parse HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {TOKEN}\r\n"
        "Content-Type: application/json\r\nContent-Length: 100\r\n\r\n{}".encode()
    )
    # Answered before its body was read (401: no token), then a byte: the clock ran on.
    answered_early = socket.create_connection(("127.0.0.1", port))
    answered_early.sendall(b"POST /api/x HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n")
    answered_early.settimeout(30)
    assert answered_early.recv(4096).startswith(b"HTTP/1.1 401")
    answered_early.sendall(b"a")
    # A request answered, and the headers of the next, pipelined in one write.
    pipelined = socket.create_connection(("127.0.0.1", port))
    pipelined.sendall(
        b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n"
        b"POST /api/x HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n"
    )
    for conn in (silent, dripping, body_never_sent, answered_early, pipelined):
        with conn:
            assert _closed_by_server(conn)
    assert _request(port).startswith(b"HTTP/1.1 200")


def _answer(conn: socket.socket) -> bytes:
    """One whole answer on a kept-alive connection: its head, then as much body as it says
    (under load the two may come in separate reads)."""
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = conn.recv(4096)
        assert chunk, "closed before a whole answer"
        data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    length = next(
        int(line.split(b":", 1)[1])
        for line in head.split(b"\r\n")
        if line.lower().startswith(b"content-length:")
    )
    while len(body) < length:
        body += conn.recv(4096)
    return head + b"\r\n\r\n" + body


def test_a_slow_answer_is_not_cut_off_only_a_slow_request(port: int) -> None:
    with socket.create_connection(("127.0.0.1", port)) as conn:
        ask = f"GET /api/summary HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {TOKEN}\r\n\r\n"
        conn.sendall(ask.encode())
        conn.settimeout(30)
        assert _answer(conn).startswith(b"HTTP/1.1 200")
        time.sleep(1.0)  # past the deadline, idle between requests (keep-alive's to judge)
        conn.sendall(ask.encode())
        assert _answer(conn).startswith(b"HTTP/1.1 200")
