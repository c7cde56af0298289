"""A scripted model server on loopback that speaks the vendors' real wire formats.

Tests queue turns as data (a completion, a vendor failure with its real status, headers and
body, a hang, a dropped connection); the server plays them in order to whoever calls, renders
each in the wire format of the path that was hit, and records every request with its secrets
blanked. Adding an API is adding a `WireFormat` for its path; the turns stay the same.
"""

from __future__ import annotations

import json
import threading
from collections import deque
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar

from agent_harness.testing.loopback import LoopbackServer
from agent_harness.testing.scripted_handler import (
    REDACTED,
    SECRET_HEADERS,
    ScriptedHandler,
    blank_secrets,
)
from agent_harness.testing.scripted_turns import (
    ScriptedCompletion,
    ScriptedDisconnect,
    ScriptedFailure,
    ScriptedHang,
    ScriptedResponder,
    ScriptedToolCall,
    ScriptedTurn,
)
from agent_harness.testing.wire_formats import (
    DEFAULT_FORMATS,
    JSON_HEADERS,
    AnthropicMessages,
    OpenAIChat,
    Rendered,
    WireFormat,
)

# The kit's users import turns and formats from here, the server's own module.
__all__ = [
    "DEFAULT_FORMATS",
    "REDACTED",
    "SECRET_HEADERS",
    "AnthropicMessages",
    "ModelServer",
    "OpenAIChat",
    "RecordedRequest",
    "Rendered",
    "ScriptedCompletion",
    "ScriptedDisconnect",
    "ScriptedFailure",
    "ScriptedHang",
    "ScriptedResponder",
    "ScriptedToolCall",
    "ScriptedTurn",
    "WireFormat",
    "approve_everything",
    "main",
    "serve",
]


@dataclass(frozen=True)
class RecordedRequest:
    """One request as the server saw it, with secret header values blanked."""

    path: str
    headers: Mapping[str, str]
    body: Any
    format: str


@dataclass
class _Script:
    turns: deque[ScriptedTurn | ScriptedResponder] = field(default_factory=deque)
    requests: list[RecordedRequest] = field(default_factory=list)
    served: int = 0
    lock: threading.Lock = field(default_factory=threading.Lock)


class ModelServer(LoopbackServer):
    """A loopback HTTP server playing a queue of scripted turns.

    Use as a context manager. `url` is the base (`http://127.0.0.1:<port>`); OpenAI-style
    clients want `url + "/v1"`, Anthropic-style clients want `url`. With `api_key` set, a request
    that does not carry that key gets the format's own 401, so tests can prove the key was sent
    without the server ever recording it.
    """

    def __init__(
        self,
        turns: Iterable[ScriptedTurn | ScriptedResponder] = (),
        *,
        api_key: str | None = None,
        formats: Mapping[str, WireFormat] = DEFAULT_FORMATS,
        port: int = 0,
    ) -> None:
        super().__init__(port)
        self._script = _Script(turns=deque(turns))
        self._api_key = api_key
        self._formats = dict(formats)

    # -- lifecycle -----------------------------------------------------------------------------

    thread_name = "model-server"
    what = "the model server"

    def _handler(self) -> type[ScriptedHandler]:
        return type("BoundModelHandler", (_ModelHandler,), {"model_server": self})

    # -- script --------------------------------------------------------------------------------

    def enqueue(self, *turns: ScriptedTurn | ScriptedResponder) -> None:
        with self._script.lock:
            self._script.turns.extend(turns)

    def enqueue_first(self, *turns: ScriptedTurn | ScriptedResponder) -> None:
        """Play these turns before anything already queued (e.g. before a standing responder)."""
        with self._script.lock:
            self._script.turns.extendleft(reversed(turns))

    @property
    def requests(self) -> list[RecordedRequest]:
        with self._script.lock:
            return list(self._script.requests)

    @property
    def remaining(self) -> int:
        with self._script.lock:
            return len(self._script.turns)

    # -- used by the handler -------------------------------------------------------------------

    def _take(
        self, path: str, headers: Mapping[str, str], body: Any, wire: WireFormat
    ) -> tuple[ScriptedTurn | None, int]:
        recorded = blank_secrets(headers)
        with self._script.lock:
            self._script.requests.append(RecordedRequest(path, recorded, body, wire.name))
            self._script.served += 1
            number = self._script.served
            if self._api_key is not None and wire.api_key(headers) != self._api_key:
                return wire.error(
                    401, "the API key sent is not the one this server expects"
                ), number
            turn = self._script.turns[0] if self._script.turns else None
            if not isinstance(turn, ScriptedResponder) or turn.once:
                turn = self._script.turns.popleft() if self._script.turns else None
        if isinstance(turn, ScriptedResponder):
            return turn.respond(body), number
        return turn, number


class _ModelHandler(ScriptedHandler):
    """Plays the next turn of the server's script in the wire format of the path asked for."""

    model_server: ClassVar[ModelServer]

    def do_POST(self) -> None:
        path = self.api_path()
        body = self.read_json()
        wire = self.model_server._formats.get(path)
        if wire is None:
            error = json.dumps({"error": {"message": f"no API at {path}"}}).encode()
            self._send_whole(404, JSON_HEADERS, error)
            return
        turn, number = self.model_server._take(path, self.lower_headers(), body, wire)
        if turn is None:
            turn = wire.error(500, f"the model server script is exhausted (request {number})")
        if body is None and isinstance(turn, ScriptedCompletion):
            turn = wire.error(400, "the request body is not JSON")
        self._play(turn, wire, body, number)

    def _play(self, turn: ScriptedTurn, wire: WireFormat, body: Any, number: int) -> None:
        if isinstance(turn, ScriptedFailure):
            headers = (("content-type", turn.content_type), *turn.headers)
            self._send_whole(turn.status, headers, turn.body)
        elif isinstance(turn, ScriptedHang):
            self.model_server._closing.wait(turn.max_s)
            self.reset_connection()
        elif isinstance(turn, ScriptedDisconnect):
            self.reset_connection()
        else:
            rendered = wire.render(turn, body, number)
            if rendered.events is None:
                self._send_whole(rendered.status, rendered.headers, rendered.body)
            else:
                self._send_stream(rendered, turn.cut_after_events)

    def _send_whole(self, status: int, headers: Iterable[tuple[str, str]], body: bytes) -> None:
        self.send_response(status)
        for name, value in headers:
            self.send_header(name, value)
        self.send_header("content-length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def _send_stream(self, rendered: Rendered, cut_after: int | None) -> None:
        self.send_response(rendered.status)
        for name, value in rendered.headers:
            self.send_header(name, value)
        self.send_header("cache-control", "no-cache")
        self.end_headers()
        for index, event in enumerate(rendered.events or ()):
            if cut_after is not None and index >= cut_after:
                self.wfile.flush()
                self.reset_connection()
                return
            self.wfile.write(event)
            self.wfile.flush()


def approve_everything(_body: Any) -> ScriptedCompletion:
    """A reviewer that approves whatever it is shown (for trying the pipeline, not judging)."""
    verdict = {
        "approved": True,
        "reasons": ["scripted reviewer: approves every change"],
        "permanent": False,
    }
    return ScriptedCompletion(text=json.dumps(verdict))


def main(argv: list[str] | None = None) -> int:
    """Serve scripted rules on loopback until interrupted (see --help): a reviewer that
    approves everything, or inception's planner. The demo's reviewer is
    `python -m agent_harness.demo.rules`."""
    import argparse

    from agent_harness.testing.planner_rules import inception_rules

    rules = {"approve": approve_everything, "inception": inception_rules}
    parser = argparse.ArgumentParser(
        prog="python -m agent_harness.testing.model_server",
        description="A scripted model server on 127.0.0.1 speaking OpenAI and Anthropic wire "
        "formats. Point a route at it, e.g. OPENAI_BASE_URL=http://127.0.0.1:PORT/v1.",
    )
    parser.add_argument("--port", type=int, default=0, help="port (default: any free one)")
    parser.add_argument(
        "--rules",
        choices=sorted(rules),
        default="approve",
        help="approve: a reviewer approving every change (default); inception: the scripted "
        "planner of `agent-harness inception` (it approves any other request)",
    )
    args = parser.parse_args(argv)
    serve(ScriptedResponder(rules[args.rules]), args.port)
    return 0


def serve(responder: ScriptedResponder, port: int = 0) -> None:
    """Serve `responder` on loopback until Ctrl-C, printing where (for the command lines that
    run a scripted reviewer beside a real run: this module's and the demo's)."""
    import time

    with ModelServer([responder], port=port) as server:
        print(f"scripted model server at {server.url} (OpenAI: {server.url}/v1)", flush=True)
        try:
            while True:
                time.sleep(3600)
        except KeyboardInterrupt:
            return


if __name__ == "__main__":
    raise SystemExit(main())
