"""A small loopback HTTP server that puts any `SessionHost` behind the remote session API.

It is what `RemoteSessionHost` talks to in tests, and a reference for a real remote host. Every
request needs `Authorization: Bearer <token>` (else 401). The API, all JSON unless noted:

    POST   /sessions                      {name, command, cwd, env, log_path, stdin_devnull}
                                          -> 201 {name}; 409 {error: "exists"} if it is live
    GET    /sessions/{name}               -> 200 {name, alive, exit_code}; 404 if unknown
    GET    /sessions/{name}/screen?lines= -> 200 {screen}
    GET    /sessions/{name}/output        -> 200 text/plain, the full log
    POST   /sessions/{name}/keys          {text, enter} -> 204; 409 {error: "not_running"}
    DELETE /sessions/{name}               -> 204 (also when it did not exist)
    GET    /sessions/{name}/attach        -> 200 [argv...] to run on the host's machine

Errors are `{error, message}` with 400 / 401 / 404 / 409 / 500.
"""

from __future__ import annotations

import hmac
import json
import socket
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, ClassVar
from urllib.parse import parse_qs, urlsplit

from agent_harness.sessions.protocol import (
    SessionError,
    SessionExists,
    SessionHost,
    SessionNotFound,
    SessionNotRunning,
    SessionSpec,
)

_LOOPBACK = ("127.0.0.1", "::1", "localhost")


class _Reply(Exception):
    """Ends a request early with this status and JSON body."""

    def __init__(self, status: int, error: str, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.body = {"error": error, "message": message}


class SessionServer:
    """Serves `host` on loopback. Use as a context manager, or `start()` / `close()`."""

    def __init__(self, host: SessionHost, token: str, bind: str = "127.0.0.1") -> None:
        if bind not in _LOOPBACK:
            raise ValueError(f"the session server only binds to loopback, not {bind!r}")
        if not token:
            raise ValueError("the session server needs a token")
        self.host = host
        self.token = token
        handler = type("BoundSessionHandler", (_SessionHandler,), {"sessions": self})
        server = ThreadingHTTPServer((bind, 0), handler)
        server.daemon_threads = True
        self._server = server
        self._thread: threading.Thread | None = None

    @property
    def url(self) -> str:
        address, port = self._server.server_address[:2]
        text = address.decode() if isinstance(address, bytes) else str(address)
        host = f"[{text}]" if ":" in text else text
        return f"http://{host}:{port}"

    def start(self) -> SessionServer:
        self._thread = threading.Thread(
            target=self._server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        )
        self._thread.start()
        return self

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)

    def __enter__(self) -> SessionServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()


@contextmanager
def running_session_server(host: SessionHost, token: str) -> Iterator[SessionServer]:
    """A started server for the duration of the block."""
    with SessionServer(host, token) as server:
        yield server


class _SessionHandler(BaseHTTPRequestHandler):
    """One connection to the session server; each request maps to one `SessionHost` call."""

    sessions: ClassVar[SessionServer]
    protocol_version = "HTTP/1.1"

    def setup(self) -> None:
        super().setup()
        # Headers and body go out in separate writes; without this, Nagle's algorithm and
        # delayed ACKs add ~40 ms to every poll.
        self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def log_message(self, format: str, *args: Any) -> None:
        pass  # tests and users read state through the API, not the server's chatter

    def do_GET(self) -> None:
        self._handle("GET")

    def do_POST(self) -> None:
        self._handle("POST")

    def do_DELETE(self) -> None:
        self._handle("DELETE")

    def _handle(self, method: str) -> None:
        """Answer one request, turning each refusal of the host into its status code."""
        try:
            self._dispatch(method)
        except _Reply as reply:
            self._send(reply.status, reply.body)
        except SessionExists as exc:
            self._send(409, {"error": "exists", "message": str(exc)})
        except SessionNotRunning as exc:
            self._send(409, {"error": "not_running", "message": str(exc)})
        except SessionNotFound as exc:
            self._send(404, {"error": "not_found", "message": str(exc)})
        except (SessionError, ValueError) as exc:
            self._send(500, {"error": "host_failed", "message": str(exc)})

    def _dispatch(self, method: str) -> None:
        # Every request body is read before replying, so keep-alive connections stay usable.
        body = self._body() if method == "POST" else {}
        if not self._authorised():
            raise _Reply(401, "unauthorised", "a valid bearer token is required")
        parts = urlsplit(self.path)
        segments = [s for s in parts.path.split("/") if s]
        if segments == ["sessions"] and method == "POST":
            self._start(body)
        elif len(segments) >= 2 and segments[0] == "sessions":
            self._session_request(method, segments[1], segments[2:], parse_qs(parts.query), body)
        else:
            raise _Reply(404, "not_found", f"no route {method} {parts.path}")

    def _session_request(
        self,
        method: str,
        name: str,
        rest: list[str],
        query: dict[str, list[str]],
        body: dict[str, Any],
    ) -> None:
        """A request about the session `name`; `rest` is what follows its name in the path."""
        host = self.sessions.host
        if method == "DELETE" and not rest:
            host.kill(name)  # also for an unknown session: deleting is idempotent
            self._send(204)
            return
        if not host.exists(name):
            raise _Reply(404, "not_found", f"no session named {name}")
        if method == "GET" and not rest:
            status = host.status(name)
            self._send(200, {"name": name, "alive": status.alive, "exit_code": status.exit_code})
        elif method == "GET" and rest == ["screen"]:
            lines = int(query.get("lines", ["50"])[0])
            self._send(200, {"screen": host.screen(name, lines)})
        elif method == "GET" and rest == ["output"]:
            self._send(200, text=host.output(name))
        elif method == "GET" and rest == ["attach"]:
            self._send(200, host.attach_command(name))
        elif method == "POST" and rest == ["keys"]:
            host.send_keys(name, str(body.get("text", "")), bool(body.get("enter", True)))
            self._send(204)
        else:
            raise _Reply(404, "not_found", f"no route {method} {urlsplit(self.path).path}")

    def _start(self, body: dict[str, Any]) -> None:
        try:
            spec = SessionSpec(
                name=str(body["name"]),
                command=[str(x) for x in body["command"]],
                cwd=Path(str(body["cwd"])),
                env={str(k): str(v) for k, v in dict(body["env"]).items()},
                log_path=Path(str(body["log_path"])),
                stdin_devnull=bool(body.get("stdin_devnull", False)),
            )
        except (KeyError, TypeError, ValueError) as exc:
            raise _Reply(400, "bad_spec", f"invalid session spec: {exc}") from exc
        self.sessions.host.start(spec)
        self._send(201, {"name": spec.name})

    def _authorised(self) -> bool:
        given = self.headers.get("Authorization", "")
        expected = f"Bearer {self.sessions.token}"
        return hmac.compare_digest(given.encode("utf-8"), expected.encode("utf-8"))

    def _body(self) -> dict[str, Any]:
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        try:
            data = json.loads(raw or b"{}")
        except ValueError as exc:
            raise _Reply(400, "bad_json", "the body is not JSON") from exc
        if not isinstance(data, dict):
            raise _Reply(400, "bad_json", "the body must be a JSON object")
        return data

    def _send(self, status: int, body: Any = None, text: str | None = None) -> None:
        if text is not None:
            payload, ctype = text.encode("utf-8"), "text/plain; charset=utf-8"
        elif body is not None:
            payload, ctype = json.dumps(body).encode("utf-8"), "application/json"
        else:
            payload, ctype = b"", "application/json"
        self.send_response(status)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        if payload:
            self.wfile.write(payload)


def serve_main(argv: list[str] | None = None) -> int:
    """`python -m agent_harness.testing.session_server --state DIR [--host tmux|headless]`:
    serve a session host on a loopback port until killed, as a remote machine would.

    The bearer token is read from the variable named by `--token-env` (default
    AGENT_HARNESS_SESSION_TOKEN) and, like every credential, sealed out of this process's
    environment first, so the agents it starts cannot read it from /proc.
    """
    import argparse
    import time

    from agent_harness.secrets.process import process_env, seal_process
    from agent_harness.sessions.default import default_host

    seal_process()
    parser = argparse.ArgumentParser(prog="session_server")
    parser.add_argument("--state", type=Path, required=True, help="sessions, logs and records")
    parser.add_argument("--host", default="headless", choices=["tmux", "headless"])
    parser.add_argument("--token-env", default="AGENT_HARNESS_SESSION_TOKEN")
    args = parser.parse_args(argv)
    token = process_env().get(args.token_env, "")
    if not token:
        parser.error(f"set {args.token_env} to the bearer token clients must send")
    host = default_host(args.state, args.host)
    with running_session_server(host, token) as server:
        sys.stdout.write(f"serving {server.url}\n")
        sys.stdout.flush()
        while True:
            time.sleep(3600)


if __name__ == "__main__":
    sys.exit(serve_main())
