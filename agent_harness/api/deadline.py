"""uvicorn's HTTP/1.1 protocol with a deadline on reading each request.

uvicorn times out a connection idle between two requests (keep-alive), but never one that is
still sending its request: a client that sends a header a byte a second, or declares a body it
never sends, held its connection for ever, and enough of them (no token needed) left the
server nothing to answer anyone else with. Here each request, its headers and its body, must
arrive within `REQUEST_DEADLINE_S` of its first byte (of the connection, for the first); a
client past that has its connection closed. The time the app takes to answer is not counted.
"""

from __future__ import annotations

import asyncio
from typing import Any

import h11
from uvicorn.protocols.http.h11_impl import H11Protocol

# Seconds a client has to send one whole request: headers and body (at most `--max-body`).
REQUEST_DEADLINE_S = 30.0
# Connections served at once; past that, uvicorn answers 503 at once.
MAX_CONNECTIONS = 512

_READING = (h11.IDLE, h11.SEND_BODY)


class DeadlinedH11(H11Protocol):
    """`H11Protocol`, closing a connection whose request is not whole within the deadline."""

    deadline_s = REQUEST_DEADLINE_S

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._deadline: asyncio.TimerHandle | None = None

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self._arm()

    def data_received(self, data: bytes) -> None:
        if self._deadline is None and self.conn.their_state is h11.IDLE:
            self._arm()  # the first byte of a request after a keep-alive pause
        super().data_received(data)
        self._follow()

    def on_response_complete(self) -> None:
        self._disarm()  # the next request's clock starts at its first byte
        super().on_response_complete()
        # Still sending a body the app answered without reading (a 401 before it), or a
        # pipelined request already begun: its clock runs (uvicorn's keep-alive timer stops
        # at the next byte, so nothing else would).
        if self.conn.their_state is h11.SEND_BODY:
            self._arm()

    def _follow(self) -> None:
        """Stop the clock once the request is whole; keep one running while it is not."""
        if self.conn.their_state not in _READING:
            self._disarm()  # the request is whole (or the connection is done with)
        elif self._deadline is None and self.conn.their_state is h11.SEND_BODY:
            self._arm()

    def connection_lost(self, exc: Exception | None) -> None:
        self._disarm()
        super().connection_lost(exc)

    def _arm(self) -> None:
        self._disarm()
        self._deadline = self.loop.call_later(self.deadline_s, self._too_slow)

    def _disarm(self) -> None:
        if self._deadline is not None:
            self._deadline.cancel()
            self._deadline = None

    def _too_slow(self) -> None:
        self._deadline = None
        if self.conn.their_state in _READING and not self.transport.is_closing():
            self.transport.close()
