"""The harness's PostgreSQL connections notice a dead link: TCP keepalives and a bound on
unacknowledged writes are set on their sockets, unless the URL sets its own."""

from __future__ import annotations

import socket
from typing import Any

import pytest

from agent_harness.store import pglink
from agent_harness.store.database import open_store
from tests.shared.stores import pg_problem, pg_url

pytestmark = pytest.mark.integration


def socket_options(conn: Any) -> tuple[int, int, int, int, int]:
    """(keepalive, idle s, interval s, probes, user timeout ms) of a connection's socket."""
    probe = socket.socket(fileno=socket.dup(conn.pgconn.socket))
    try:
        return (
            probe.getsockopt(socket.SOL_SOCKET, socket.SO_KEEPALIVE),
            probe.getsockopt(socket.IPPROTO_TCP, socket.TCP_KEEPIDLE),
            probe.getsockopt(socket.IPPROTO_TCP, socket.TCP_KEEPINTVL),
            probe.getsockopt(socket.IPPROTO_TCP, socket.TCP_KEEPCNT),
            probe.getsockopt(socket.IPPROTO_TCP, socket.TCP_USER_TIMEOUT),
        )
    finally:
        probe.close()


@pytest.fixture
def url() -> str:
    problem = pg_problem(pg_url())
    if problem:
        pytest.skip(problem)
    return pg_url()


def test_a_connection_probes_an_idle_link_and_bounds_unacknowledged_writes(url: str) -> None:
    with pglink.connect(url) as conn:
        assert socket_options(conn)[0] != 0
        assert socket_options(conn)[1:] == (30, 10, 3, 60_000)
    store = open_store(url, migrate=False, check_protection=False)  # the store's own, too
    try:
        conn, _ = store._conn()
        assert socket_options(conn)[1:] == (30, 10, 3, 60_000)
    finally:
        store.close()


def test_a_url_that_sets_its_own_link_options_keeps_them(url: str) -> None:
    sep = "&" if "?" in url else "?"
    with pglink.connect(f"{url}{sep}keepalives_idle=7&tcp_user_timeout=5000") as conn:
        assert socket_options(conn)[1:] == (7, 10, 3, 5000)
