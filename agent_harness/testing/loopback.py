"""The lifecycle shared by the scripted servers of the testing kit: bind 127.0.0.1, serve in a
daemon thread, and close quickly (a short poll, and `_closing` set first so a held request can
let go). Subclasses supply only their request handler.
"""

from __future__ import annotations

import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Self


class LoopbackServer:
    """A scripted HTTP server on loopback, used as a context manager."""

    thread_name = "loopback-server"
    what = "the server"  # for the error when `url` is asked of a server that is not running

    def __init__(self, port: int = 0) -> None:
        self._port = port
        self._closing = threading.Event()
        self._httpd: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        raise NotImplementedError

    def start(self) -> Self:
        self._httpd = ThreadingHTTPServer(("127.0.0.1", self._port), self._handler())
        self._httpd.daemon_threads = True
        # A short poll keeps close() quick; the default half second adds up over a test suite.
        self._thread = threading.Thread(
            target=self._httpd.serve_forever, args=(0.02,), name=self.thread_name, daemon=True
        )
        self._thread.start()
        return self

    def close(self) -> None:
        self._closing.set()
        if self._httpd is not None:
            self._httpd.shutdown()
            self._httpd.server_close()
            self._httpd = None
        if self._thread is not None:
            self._thread.join(timeout=5)
            self._thread = None

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def url(self) -> str:
        if self._httpd is None:
            raise RuntimeError(f"{self.what} is not running; use it as a context manager")
        host, port = self._httpd.server_address[:2]
        return f"http://{host!s}:{port}"
