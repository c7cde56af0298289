"""The request handler the scripted servers share: quiet, lenient about bodies, able to hang up.

A scripted server plays the failures a real client must survive, so besides answering it can
reset the connection on purpose (SO_LINGER 0 turns close() into an RST), and it records what it
was sent with the secret header values blanked, so a test can read every request safely.
"""

from __future__ import annotations

import contextlib
import json
import socket
import struct
from collections.abc import Mapping
from http.server import BaseHTTPRequestHandler
from typing import Any

SECRET_HEADERS = frozenset({"authorization", "x-api-key", "x-goog-api-key", "api-key", "cookie"})
REDACTED = "<redacted>"


def blank_secrets(headers: Mapping[str, str]) -> dict[str, str]:
    """The headers as they may be recorded: every credential's value replaced."""
    return {k: (REDACTED if k in SECRET_HEADERS else v) for k, v in headers.items()}


class ScriptedHandler(BaseHTTPRequestHandler):
    """One connection to a scripted server; HTTP/1.0, so each answer ends its connection."""

    protocol_version = "HTTP/1.0"

    def log_message(self, format: str, *args: Any) -> None:
        return  # a library never prints; tests read the server's recorded requests instead

    def api_path(self) -> str:
        """The path asked for, without its query string or a trailing slash."""
        return self.path.split("?", 1)[0].rstrip("/")

    def lower_headers(self) -> dict[str, str]:
        return {k.lower(): v for k, v in self.headers.items()}

    def read_json(self) -> Any:
        """The request body as JSON; None when there is none or it is not JSON (the scripted
        turn decides what such a request gets)."""
        length = int(self.headers.get("content-length") or 0)
        raw = self.rfile.read(length) if length else b""
        try:
            return json.loads(raw) if raw else None
        except ValueError:
            return None

    def reset_connection(self) -> None:
        # SO_LINGER 0: the client sees a reset, as from a dropped proxy, not a clean end.
        with contextlib.suppress(OSError):
            self.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            self.connection.close()
        self.close_connection = True

    def finish(self) -> None:
        # The scripted turn may have closed the socket on purpose.
        with contextlib.suppress(OSError, ValueError):
            super().finish()
