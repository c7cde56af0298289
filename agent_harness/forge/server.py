"""The forge on a socket: GitHub's HTTP conventions around the REST handlers.

Everything GitHub does to every response lives here, in the order GitHub applies it: request
accounting, injected faults, authentication (401), the primary rate limit (403 when spent),
then the handler, then pagination (`Link`), `ETag`/`If-None-Match` (a 304 costs no rate limit)
and the `x-ratelimit-*` headers. Control endpoints under `/_forge/` drive faults and accounting.
Web pages under `/_html/` (forge/pages.py) stand outside all of that, as github.com's pages do.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import socket
import sqlite3
import sys
import threading
import urllib.parse
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import TracebackType
from typing import Any

from agent_harness.errors import UNREADABLE_JSON, read_json
from agent_harness.forge.core import Forge
from agent_harness.forge.errors import ApiError, ForgeAddressError
from agent_harness.forge.faults import Fault, FaultKind
from agent_harness.forge.pages import PREFIX as PAGES
from agent_harness.forge.pages import SECURITY_POLICY, render_page
from agent_harness.forge.ratelimit import RateState
from agent_harness.forge.routes import Call, Reply

RATE_DOCS = "https://docs.github.com/rest/overview/rate-limits-for-the-rest-api"
AUTH_DOCS = "https://docs.github.com/rest"
SECONDARY_MESSAGE = (
    "You have exceeded a secondary rate limit. Please wait a few minutes before you try again. "
    "If you reach out to GitHub Support for help, please include the request ID {rid}."
)
PRIMARY_MESSAGE = (
    "API rate limit exceeded for user ID {uid}. If you reach out to GitHub Support for help, "
    "please include the request ID {rid}."
)
DEFAULT_PER_PAGE = 30
MAX_PER_PAGE = 100


class ForgeServer:
    """Serves a `Forge` over HTTP at `api_url` (the PyGithub `base_url`, no `/api/v3` prefix)."""

    def __init__(self, forge: Forge, host: str = "127.0.0.1", port: int = 0) -> None:
        self.forge = forge
        self.host = host
        self.port = port
        self._httpd: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    @property
    def api_url(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port}"

    def bind(self) -> None:
        """Open the listening socket (idempotent); raises ForgeAddressError if it cannot."""
        if self._httpd is not None:
            return
        handler = type("BoundForgeHandler", (_Handler,), {"forge": self.forge})
        server_cls = _V6Server if ":" in self.host else _Server
        try:
            self._httpd = server_cls((self.host, self.port), handler)
        except OSError as exc:
            raise ForgeAddressError(self.host, self.port, exc.strerror or str(exc)) from exc
        self.port = int(self._httpd.server_address[1])
        self.forge.api_url = self.api_url

    def start(self) -> ForgeServer:
        """Serve on a background thread and return at once."""
        self.bind()
        assert self._httpd is not None
        self._thread = threading.Thread(
            target=self._httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        )
        self._thread.start()
        return self

    def serve_forever(self) -> None:
        """Serve on the calling thread until interrupted (KeyboardInterrupt propagates)."""
        self.bind()
        assert self._httpd is not None
        try:
            self._httpd.serve_forever(poll_interval=0.2)
        finally:
            self._httpd.server_close()
            self._httpd = None

    def stop(self) -> None:
        if self._httpd is None:
            return
        self._httpd.shutdown()
        self._httpd.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)
        self._httpd = None
        self._thread = None

    def __enter__(self) -> ForgeServer:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()


@dataclass(frozen=True)
class _Request:
    """What one request asks, read once: the path without a trailing slash, the query both raw
    (for the `Link` header) and as the last value of each parameter, and the JSON body."""

    method: str
    path: str
    raw_query: str
    query: dict[str, str]
    body: Any


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        self._open: set[socket.socket] = set()  # before binding: a failed bind closes
        self._open_lock = threading.Lock()
        super().__init__(*args, **kwargs)

    def process_request(self, request: Any, client_address: Any) -> None:
        with self._open_lock:
            self._open.add(request)
        super().process_request(request, client_address)

    def shutdown_request(self, request: Any) -> None:
        with self._open_lock:
            self._open.discard(request)
        super().shutdown_request(request)

    def handle_error(self, request: Any, client_address: Any) -> None:
        """A client that hung up mid-request (killed, or timed out) is normal life for a server:
        say nothing. Anything else is the forge's own bug and is still reported."""
        if isinstance(sys.exc_info()[1], ConnectionError):
            return
        super().handle_error(request, client_address)

    def server_close(self) -> None:
        """Also end kept-alive connections: a stopped forge answers nobody, as a dead server."""
        super().server_close()
        with self._open_lock:
            held, self._open = list(self._open), set()
        for request in held:
            with contextlib.suppress(OSError):  # already closed by its client
                request.shutdown(socket.SHUT_RDWR)


class _V6Server(_Server):
    address_family = socket.AF_INET6


# GitHub refuses request bodies much smaller than this; the forge reads none bigger.
MAX_BODY = 25 * 1024 * 1024


class _Handler(BaseHTTPRequestHandler):
    forge: Forge
    protocol_version = "HTTP/1.1"
    server_version = "agent-harness-forge"
    # A client that stops sending mid-request (or a slowloris) holds a thread no longer.
    timeout = 120

    def setup(self) -> None:
        super().setup()
        # Headers and body go out in two writes; without NODELAY, Nagle and delayed ACKs
        # stall every response by ~40 ms.
        self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def log_message(self, format: str, *args: Any) -> None:
        # The forge is a library: request logs would go to stderr of whoever embeds it.
        return

    def do_GET(self) -> None:
        self._serve("GET")

    def do_POST(self) -> None:
        self._serve("POST")

    def do_PATCH(self) -> None:
        self._serve("PATCH")

    def do_PUT(self) -> None:
        self._serve("PUT")

    def do_DELETE(self) -> None:
        self._serve("DELETE")

    # -- plumbing -----------------------------------------------------------------------------
    def _send(self, status: int, body: Any = None, headers: dict[str, str] | None = None) -> None:
        if self._drop_after:
            self._hang_up()
            return
        data = b"" if body is None else json.dumps(body).encode()
        self.send_response(status)
        out = {"x-github-request-id": self._request_id, "x-github-media-type": "github.v3"}
        out |= headers or {}
        if body is not None:
            out["content-type"] = "application/json; charset=utf-8"
        for name, value in out.items():
            self.send_header(name, value)
        self.send_header("content-length", str(len(data)))
        self.end_headers()
        if data and self.command != "HEAD":
            self.wfile.write(data)
        if self._route is not None:
            for observe in self.forge.observers:
                observe(self._route[0], self._route[1], status, body)

    def _page(self, path: str) -> None:
        """A web page: no token, no rate limit, not an API request, never a fault."""
        page = render_page(self.forge, path)
        data = page.body()
        self.send_response(page.status)
        headers = {
            "Content-Type": page.content_type,
            "Content-Security-Policy": SECURITY_POLICY,
            "X-Content-Type-Options": "nosniff",
            "Referrer-Policy": "no-referrer",
            "Cache-Control": "no-store",
            "Content-Length": str(len(data)),
        }
        if page.location:
            headers["Location"] = page.location
        for name, value in headers.items():
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(data)

    def _root(self) -> None:
        """The API's root, as GitHub's answers it (no token needed): where things are, so the
        base URL the forge prints answers too."""
        address = self.server.server_address
        host, port = (address[0], address[1]) if isinstance(address, tuple) else ("127.0.0.1", 0)
        base = f"http://{host}:{port}"
        self._send(
            200,
            {
                "current_user_url": f"{base}/user",
                "repository_url": f"{base}/repos/{{owner}}/{{repo}}",
                "issues_url": f"{base}/repos/{{owner}}/{{repo}}/issues",
                "pulls_url": f"{base}/repos/{{owner}}/{{repo}}/pulls",
                "rate_limit_url": f"{base}/rate_limit",
                "html_url": f"{base}{PAGES}/",
            },
        )

    def _hang_up(self) -> None:
        self.close_connection = True
        self.connection.shutdown(socket.SHUT_RDWR)

    def _token(self) -> str | None:
        value = self.headers.get("Authorization", "")
        scheme, _, token = value.partition(" ")
        if scheme.lower() in ("token", "bearer") and token.strip():
            return token.strip()
        return None

    def _read_body(self) -> Any:
        declared = (self.headers.get("Content-Length") or "0").strip()
        if not declared.isdigit():
            # `-1` read until the client hung up; `abc` and `1e20` were 500s.
            self.close_connection = True
            raise ApiError(400, "Content-Length must be a whole number of bytes")
        length = int(declared)
        if length > MAX_BODY:
            self.close_connection = True  # the body is left unread
            raise ApiError(413, f"request body over {MAX_BODY} bytes")
        raw = self.rfile.read(length) if length else b""
        if not raw.strip():
            return None
        try:
            # Also refused: NaN and infinite numbers, too long a number, too deep a nest.
            # Half a surrogate pair ("\\ud800") is read as U+FFFD.
            return read_json(raw)
        except UNREADABLE_JSON as exc:
            raise ApiError(400, "Problems parsing JSON") from exc

    def _serve(self, method: str) -> None:
        self._request_id = uuid.uuid4().hex[:20].upper()
        self._route: tuple[str, str | None] | None = None
        self._drop_after = False
        parsed = urllib.parse.urlsplit(self.path)
        try:
            if method == "GET" and (parsed.path == PAGES or parsed.path.startswith(PAGES + "/")):
                self._page(parsed.path)
                return
            if method == "GET" and parsed.path in ("", "/"):
                self._root()
                return
            request = _Request(
                method,
                parsed.path.rstrip("/") or "/",
                parsed.query,
                {k: v[-1] for k, v in urllib.parse.parse_qs(parsed.query).items()},
                self._read_body(),
            )
            if request.path.startswith("/_forge/"):
                self._control(request)
            else:
                self._api(request)
        except ApiError as exc:
            self._send(exc.status, exc.body(), exc.headers)
        except (BrokenPipeError, ConnectionResetError):
            self.close_connection = True
        except Exception as exc:  # a forge bug: answer 500 as GitHub does, keep it inspectable
            self.forge.server_errors.append(exc)
            self._send(500, {"message": f"Server Error: {type(exc).__name__}: {exc}"})

    # -- the API ------------------------------------------------------------------------------
    def _api(self, request: _Request) -> None:
        forge = self.forge
        method, path = request.method, request.path
        found = forge.router.match(method, path)
        template = found[0].template if found else forge.router.template_for(path)
        forge.requests.record(method, template)
        self._route = (method, template)
        if self._fault_ended(method, path, template):
            return
        token, user, can_write = self._caller()
        free = template == "/rate_limit"  # as on GitHub, asking costs nothing
        state = forge.limiter.peek(token)
        if state.remaining == 0 and not free:
            raise ApiError(
                403,
                PRIMARY_MESSAGE.format(uid=user["id"], rid=self._request_id),
                documentation_url=RATE_DOCS,
                headers=state.headers(),
            )
        if found is None:
            raise ApiError(404, "Not Found", headers=forge.limiter.spend(token).headers())

        def charge() -> RateState:
            return state if free else forge.limiter.spend(token)

        route, params = found
        call = Call(
            forge=forge,
            method=method,
            path=path,
            params=params,
            query=request.query,
            body=request.body,
            user=user,
            can_write=can_write,
            render=forge.renderer(),
            token=token,
        )
        try:
            reply = forge.dispatch(call, route.handler)
        except ApiError as exc:
            exc.headers |= charge().headers()
            raise
        self._answer(request, reply, state, charge)

    def _fault_ended(self, method: str, path: str, template: str | None) -> bool:
        """Apply the injected fault due for this request, if any; True when the fault is the
        whole answer (latency and a drop after answering let the request go on)."""
        fault = self.forge.faults.take(method, path, template)
        if fault is None:
            return False
        if fault.kind is FaultKind.DROP:
            self._hang_up()
            return True
        if fault.kind is FaultKind.DROP_AFTER:
            self._drop_after = True
        elif fault.kind is FaultKind.LATENCY:
            self.forge.sleep(fault.delay_s)
        else:
            self._fault_reply(fault)
            return True
        return False

    def _caller(self) -> tuple[str, sqlite3.Row, bool]:
        """The caller's token, user and whether it may write; 401 without a known token."""
        token = self._token()
        if token is None:
            raise ApiError(401, "Requires authentication")
        auth = self.forge.authenticate(token)
        if auth is None:
            raise ApiError(401, "Bad credentials")
        user, can_write = auth
        return token, user, can_write

    def _answer(
        self, request: _Request, reply: Reply, state: RateState, charge: Callable[[], RateState]
    ) -> None:
        """Send a handler's reply: the requested page, rendered; for a GET its ETag, where a
        match is a 304 that costs no rate limit; then the rate-limit headers once charged."""
        headers = dict(reply.headers)
        payload = reply.body
        if reply.paginate:
            base = self.forge.api_url + request.path
            payload, link = _page(payload, request.query, request.raw_query, base)
            if link:
                headers["link"] = link
        if reply.render_item is not None:
            with self.forge.db.transaction():
                payload = [reply.render_item(item) for item in payload]
        if payload is not None and 200 <= reply.status < 300:
            # GitHub sends a validator with every answer that has a body, writes included.
            digest = hashlib.sha256(json.dumps(payload, sort_keys=True).encode()).hexdigest()
            etag = f'W/"{digest[:40]}"'
            headers["etag"] = etag
            headers["cache-control"] = "private, max-age=60, s-maxage=60"
            if reply.status == 201 and isinstance(payload, dict) and "url" in payload:
                headers.setdefault("location", str(payload["url"]))
        if request.method == "GET" and reply.status == 200:
            wanted = self.headers.get("If-None-Match", "")
            etag = headers.get("etag", "")
            if etag in [t.strip() for t in wanted.split(",")] or wanted.strip() == "*":
                self._send(304, None, headers | state.headers())
                return
        self._send(reply.status, payload, headers | charge().headers())

    def _fault_reply(self, fault: Fault) -> None:
        forge = self.forge
        token = self._token() or ""
        state = forge.limiter.peek(token)
        if fault.kind in (FaultKind.SECONDARY_RATE_LIMIT, FaultKind.SECONDARY_RATE_LIMIT_429):
            status = 429 if fault.kind is FaultKind.SECONDARY_RATE_LIMIT_429 else 403
            body = {
                "message": SECONDARY_MESSAGE.format(rid=self._request_id),
                "documentation_url": RATE_DOCS + "#about-secondary-rate-limits",
            }
            self._send(status, body, state.headers() | {"retry-after": str(fault.retry_after)})
        elif fault.kind is FaultKind.PRIMARY_RATE_LIMIT:
            reset = int(forge.clock()) + fault.reset_in_s
            headers = state.headers() | {
                "x-ratelimit-remaining": "0",
                "x-ratelimit-used": str(state.limit),
                "x-ratelimit-reset": str(reset),
            }
            body = {
                "message": PRIMARY_MESSAGE.format(uid=1, rid=self._request_id),
                "documentation_url": RATE_DOCS,
            }
            self._send(403, body, headers)
        elif fault.kind is FaultKind.BAD_CREDENTIALS:
            self._send(401, {"message": "Bad credentials", "documentation_url": AUTH_DOCS})
        elif fault.kind is FaultKind.REPLY and fault.raw is not None:
            data = fault.raw.encode("utf-8", "replace")
            self.send_response(fault.status)
            for name, value in {"content-type": "text/html; charset=utf-8",
                                **(fault.headers or {})}.items():  # fmt: skip
                self.send_header(name, value)
            self.send_header("content-length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)
        elif fault.kind is FaultKind.REPLY:
            self._send(fault.status, fault.body, dict(fault.headers or {}))
        else:
            reason = {502: "Bad Gateway", 503: "Service Unavailable"}.get(fault.status, "Error")
            self._send(fault.status, {"message": reason})

    # -- control endpoints --------------------------------------------------------------------
    def _control(self, request: _Request) -> None:
        if self._token() != self.forge.token:
            raise ApiError(401, "Bad credentials")
        method, path, query, body = request.method, request.path, request.query, request.body
        faults, forge = self.forge.faults, self.forge
        if path == "/_forge/faults" and method == "POST":
            if not isinstance(body, dict):
                raise ApiError(400, "Problems parsing JSON")
            try:
                fault = faults.add(Fault.from_json(body))
            except TypeError as exc:
                raise ApiError(422, f"bad fault: {exc}") from exc
            self._send(201, fault.to_json())
        elif path == "/_forge/faults" and method == "GET":
            self._send(200, [f.to_json() for f in faults.pending()])
        elif path == "/_forge/faults" and method == "DELETE":
            faults.clear()
            self._send(204)
        elif path == "/_forge/mark" and method == "POST":
            self._send(200, {"mark": forge.mark()})
        elif path == "/_forge/requests" and method == "GET":
            since = int(query["since"]) if query.get("since", "").isdigit() else None
            counts = forge.request_counts(since)
            self._send(200, {"since": since or 0, "total": sum(counts.values()), "counts": counts})
        else:
            raise ApiError(404, "Not Found")


def _page(
    items: list[Any], query: dict[str, str], raw_query: str, base: str
) -> tuple[list[Any], str]:
    """One page of `items` and the Link header GitHub would send with it."""
    try:
        per_page = min(max(int(query.get("per_page", DEFAULT_PER_PAGE)), 1), MAX_PER_PAGE)
        page = max(int(query.get("page", 1)), 1)
    except ValueError:
        per_page, page = DEFAULT_PER_PAGE, 1
    last = max((len(items) + per_page - 1) // per_page, 1)
    pairs = [(k, v) for k, v in urllib.parse.parse_qsl(raw_query) if k != "page"]

    def url(n: int) -> str:
        return f"{base}?{urllib.parse.urlencode([*pairs, ('page', str(n))])}"

    links = []
    if page > 1:
        links.append(f'<{url(page - 1)}>; rel="prev"')
    if page < last:
        links.append(f'<{url(page + 1)}>; rel="next"')
        links.append(f'<{url(last)}>; rel="last"')
    if page > 1:
        links.append(f'<{url(1)}>; rel="first"')
    return items[(page - 1) * per_page : page * per_page], ", ".join(links)
