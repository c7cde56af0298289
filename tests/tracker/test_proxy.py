"""The tracker goes through the proxy the environment names, as `requests` would have it.

Its connection reads the proxy variables once, when made, rather than at every request: the
rules must stay those of `requests` (`HTTP_PROXY`, and `NO_PROXY` to go around it).
"""

from __future__ import annotations

import http.server
import threading
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager

import pytest

from tests.tracker.conftest import Scene

pytestmark = pytest.mark.integration


class _Forwarder(http.server.BaseHTTPRequestHandler):
    """A plain forward proxy: takes the absolute URL a client sends it, asks that URL, and
    hands back the answer; notes each URL it was asked for."""

    seen: list[str]

    def do_GET(self) -> None:
        self.seen.append(self.path)
        ask = urllib.request.Request(self.path, headers=dict(self.headers))
        opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
        with opener.open(ask, timeout=10) as answer:
            body = answer.read()
            self.send_response(answer.status)
            for name, value in answer.headers.items():
                if name.lower() not in ("transfer-encoding", "connection", "content-length"):
                    self.send_header(name, value)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: object) -> None:
        del format, args


@contextmanager
def forward_proxy() -> Iterator[tuple[str, list[str]]]:
    seen: list[str] = []
    handler = type("Handler", (_Forwarder,), {"seen": seen})
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", seen
    finally:
        server.shutdown()
        server.server_close()


def test_the_tracker_asks_through_the_environments_proxy_on_every_request(
    scene: Scene, monkeypatch: pytest.MonkeyPatch
) -> None:
    scene.issue("T1")
    with forward_proxy() as (proxy, seen):
        for name in ("NO_PROXY", "no_proxy", "ALL_PROXY", "all_proxy"):
            monkeypatch.delenv(name, raising=False)
        monkeypatch.setenv("HTTP_PROXY", proxy)
        tracker = scene.tracker()
        try:
            first = [issue.title for issue in tracker.list_issues()]
            second = [issue.title for issue in tracker.list_issues()]
        finally:
            tracker.close()
    assert first == second == ["T1: work"]
    api = scene.rf.server.api_url
    assert len(seen) >= 2 and all(url.startswith(api) for url in seen)


def test_no_proxy_still_takes_the_tracker_around_the_proxy(
    scene: Scene, monkeypatch: pytest.MonkeyPatch
) -> None:
    scene.issue("T1")
    with forward_proxy() as (proxy, seen):
        monkeypatch.setenv("HTTP_PROXY", proxy)
        monkeypatch.setenv("NO_PROXY", "127.0.0.1")
        tracker = scene.tracker()
        try:
            titles = [issue.title for issue in tracker.list_issues()]
        finally:
            tracker.close()
    assert titles == ["T1: work"]
    assert seen == []
