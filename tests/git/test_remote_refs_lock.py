"""The work repo's lock on remote-tracking refs: pushes side by side, a fetch alone."""

from __future__ import annotations

import threading

import pytest

from agent_harness.git.remote_lock import RemoteRefsLock
from tests.shared.sessions import wait_for

pytestmark = pytest.mark.unit


def test_pushes_of_different_branches_hold_it_together() -> None:
    lock = RemoteRefsLock()
    inside = threading.Barrier(2, timeout=10)

    def push() -> None:
        with lock.push():
            inside.wait()  # both pushes are inside at once, or this breaks

    others = threading.Thread(target=push)
    others.start()
    push()
    others.join(timeout=10)
    assert not inside.broken


def test_a_fetch_waits_for_pushes_and_new_pushes_wait_for_it() -> None:
    lock = RemoteRefsLock()
    order: list[str] = []

    def fetch() -> None:
        with lock.fetch():
            order.append("fetch")

    def push(name: str) -> None:
        with lock.push():
            order.append(name)

    fetcher = threading.Thread(target=fetch)
    later = threading.Thread(target=push, args=("later push",))
    with lock.push():
        fetcher.start()
        wait_for(lambda: lock.fetches_waiting == 1)
        later.start()  # arrives while the fetch waits: it goes after the fetch
        order.append("first push")
    fetcher.join(timeout=10)
    later.join(timeout=10)
    assert order == ["first push", "fetch", "later push"]
