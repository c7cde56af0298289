"""What is refused before any route runs: a request without the right bearer token, a change
another site's page asks for, a body over the size limit, and a JSON body that names a key
twice in one object. A plain ASGI
middleware: a request without a body costs a few microseconds, and a body is read once more,
as JSON, to find a name given twice.

The token is compared in constant time and never echoed, logged or stored.
"""

from __future__ import annotations

import hmac
import json
import re
from collections import Counter
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any
from urllib.parse import parse_qsl

from agent_harness.errors import UNREADABLE_JSON, read_json

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]

OPEN_PATHS = frozenset({"/healthz"})
HEAD_ONLY = "head_only"  # in a request's state: it was a HEAD, answered as a GET

DEFAULT_MAX_BODY = 1024 * 1024


async def _answer(send: Send, status: int, detail: str, headers: list[tuple[bytes, bytes]]) -> None:
    body = json.dumps({"detail": detail}).encode()
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [
                (b"content-type", b"application/json"),
                (b"content-length", str(len(body)).encode()),
                *headers,
            ],
        }
    )
    await send({"type": "http.response.body", "body": body})


class Guard:
    """Bearer token on every path but /healthz; request bodies of at most `max_body` bytes."""

    def __init__(self, app: ASGIApp, token: str, max_body: int = DEFAULT_MAX_BODY) -> None:
        if not token:
            raise ValueError("a token is required")
        self.app = app
        self._expected = token.encode()
        self.max_body = max_body

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        path = scope.get("path", "")
        root = scope.get("root_path", "")
        if root and path.startswith(root):
            path = path[len(root) :] or "/"
        if scope.get("method") == "HEAD":  # a GET whose answer's body is not sent
            # Marked, so a GET that pays for something (a plan written on the first GET) does
            # not pay for a look at its headers.
            state = {**scope.get("state", {}), HEAD_ONLY: True}
            scope = {**scope, "method": "GET", "state": state}
            send = _headers_only(send)
        ambiguous = _ambiguous(scope)
        if ambiguous is not None:
            # Read one way here and another by a proxy in front, such a request is refused,
            # and its connection closed (what follows a smuggled body is no request of ours).
            await _answer(send, 400, ambiguous, [(b"connection", b"close")])
            return
        if path not in OPEN_PATHS and not self._authorised(scope):
            await _answer(
                send,
                401,
                "missing or wrong bearer token (send Authorization: Bearer <HARNESS_TOKEN>)",
                [(b"www-authenticate", b"Bearer")],
            )
            return
        foreign = _cross_site(scope)
        if foreign is not None:
            await _answer(send, 403, foreign, [])
            return
        declared = self._declared_length(scope)
        if declared is not None and declared > self.max_body:
            await _answer(send, 413, f"request body over {self.max_body} bytes", [])
            return
        if scope.get("method") in ("POST", "PUT", "PATCH"):
            try:
                body = await self._read_body(receive)
            except _ClientGone:
                return  # the client left (or was too slow) before its body was whole
            if body is None:
                await _answer(send, 413, f"request body over {self.max_body} bytes", [])
                return
            unread = _unread_as_json(scope) if body else None  # a route without one: no matter
            if unread is not None:
                await _answer(send, 415, unread, [])
                return
            twice = _named_twice(body)
            if twice is not None:
                await _answer(send, 400, f"the JSON body names {twice!r} twice in one object", [])
                return
            if _holds_nul(body):
                await _answer(send, 422, NUL_REFUSED, [])
                return
            whole = _whole_characters(body)
            if whole is not body:  # rewritten: its length is no longer the one declared
                scope = {**scope, "headers": _with_length(scope.get("headers", ()), len(whole))}
            receive = _replay(whole, receive)
        await self.app(scope, receive, send)

    def _authorised(self, scope: Scope) -> bool:
        """`Authorization: Bearer <token>`, the scheme's name in any case (RFC 9110 11.1)."""
        given = b""
        for name, value in scope.get("headers", ()):
            if name == b"authorization":
                given = value
                break
        scheme, _, credentials = given.strip().partition(b" ")
        matches = hmac.compare_digest(credentials.strip(), self._expected)
        return scheme.lower() == b"bearer" and matches

    @staticmethod
    def _declared_length(scope: Scope) -> int | None:
        for name, value in scope.get("headers", ()):
            if name == b"content-length":
                try:
                    return int(value)
                except ValueError:
                    return None
        return None

    async def _read_body(self, receive: Receive) -> bytes | None:
        """The request's body, read up to the limit (a chunked one has no declared length);
        None when over it. Raises `_ClientGone` when the client went before sending it whole
        (a part of a body is never handed on as if it were all of it)."""
        chunks: list[bytes] = []
        size = 0
        while True:
            message = await receive()
            if message.get("type") != "http.request":
                raise _ClientGone
            chunks.append(message.get("body", b""))
            size += len(chunks[-1])
            if size > self.max_body:
                return None
            if not message.get("more_body", False):
                break
        return b"".join(chunks)


# Half a surrogate pair written as a JSON escape (`"\ud800"`): read as it is, the string could
# not be written back as UTF-8, and the answer that quoted it failed with a 500.
_SURROGATE_ESCAPE = re.compile(rb"\\u[dD][89a-fA-F]")


def _whole_characters(body: bytes) -> bytes:
    """`body` with each half of a surrogate pair in its JSON read as U+FFFD (as every other
    JSON the harness reads); a body that is not JSON is passed on for the route to refuse."""
    if not _SURROGATE_ESCAPE.search(body):
        return body
    try:
        data = read_json(body)
    except UNREADABLE_JSON:
        return body
    return json.dumps(data, ensure_ascii=False).encode()


class _Twice(Exception):
    def __init__(self, name: str) -> None:
        self.name = name


def _unique_pairs(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    found = dict(pairs)
    if len(found) != len(pairs):
        seen: set[str] = set()
        for name, _value in pairs:
            if name in seen:
                raise _Twice(name)
            seen.add(name)
    return found


def _named_twice(body: bytes) -> str | None:
    """The first name an object of `body`'s JSON holds twice, if any. JSON leaves which value
    wins undefined (Python's reader keeps the last; a proxy or a validator in front may keep
    the first), so such a body is refused rather than read one way here and another there. A
    body that is not JSON is passed on for the route to refuse."""
    if b'"' not in body:
        return None
    try:
        json.loads(body, object_pairs_hook=_unique_pairs)
    except _Twice as twice:
        return twice.name.encode("utf-8", "replace").decode("utf-8")
    except UNREADABLE_JSON:
        return None
    return None


class _ClientGone(Exception):
    """The client disconnected before its request's body was whole."""


def _ambiguous(scope: Scope) -> str | None:
    """Why a request could be read two ways, or None: a body framed both by Content-Length and
    by Transfer-Encoding (RFC 9112 6.1: the leftover becomes a request of its own), or an
    Authorization header or a query parameter given twice (which one counts is each reader's
    guess)."""
    names = [name for name, _value in scope.get("headers", ())]
    if b"content-length" in names and b"transfer-encoding" in names:
        return "a request with both Content-Length and Transfer-Encoding is refused"
    if names.count(b"authorization") > 1:
        return "send one Authorization header"
    query = scope.get("query_string", b"")
    if query:
        keys = Counter(key for key, _ in parse_qsl(query.decode("latin-1"), keep_blank_values=True))
        twice = sorted(key for key, times in keys.items() if times > 1)
        if twice:
            shown = twice[0].encode("ascii", "backslashreplace").decode()[:40]
            return f"query parameter {shown!r} is given more than once; give it once"
    return None


_UNSAFE = frozenset({"POST", "PUT", "PATCH", "DELETE"})


def _cross_site(scope: Scope) -> str | None:
    """Why a change asked for by another site's page is refused, or None. Behind a proxy that
    adds the token (so /docs works in a browser), any page the person opens could otherwise
    post a form to stop a project or retry an item. A browser says where such a request comes
    from: `Sec-Fetch-Site` (`same-origin` for /docs itself, whatever Host a proxy in front
    rewrote), and in older ones only `Origin`, compared with the address the request was sent
    to (Host, or the X-Forwarded-Host a proxy passed on). A script or a curl says neither and
    is let through."""
    if scope.get("method") not in _UNSAFE:
        return None
    headers = {name: value.strip().lower() for name, value in scope.get("headers", ())}
    fetched = headers.get(b"sec-fetch-site")
    if fetched is not None:
        if fetched in (b"same-origin", b"none"):
            return None
        return "a change asked for by another site's page is refused (Sec-Fetch-Site)"
    origin = headers.get(b"origin", b"")
    if not origin:
        return None
    sent_to = {headers.get(b"host", b""), headers.get(b"x-forwarded-host", b"")} - {b""}
    if origin.partition(b"://")[2] not in sent_to:  # `null` too: a sandboxed frame's, a file's
        return "a change asked for by another site's page is refused (its Origin is not here)"
    return None


def _unread_as_json(scope: Scope) -> str | None:
    """Why a body would not be read as the JSON it must be, from its headers: declared as
    something else (a form, text/plain), encoded (gzip) where nothing decodes it, or not
    declared at all (a route reading JSON would not read it). None when it is JSON."""
    typed = False
    for name, value in scope.get("headers", ()):
        if name == b"content-encoding" and value.strip().lower() not in (b"", b"identity"):
            return "Content-Encoding is not taken: send the body as plain JSON"
        if name == b"content-type":
            typed = True
            kind = value.split(b";", 1)[0].strip().lower()
            if kind != b"application/json" and not kind.endswith(b"+json"):
                return "send the body as JSON, with Content-Type: application/json"
    return None if typed else "send the body as JSON, with Content-Type: application/json"


NUL_REFUSED = "a string in the body holds a NUL character (U+0000), which no field takes"


def _holds_nul(body: bytes) -> bool:
    """Whether a string of `body`'s JSON holds U+0000 (written `\\u0000`: JSON has no other
    way): no title, check or paragraph may, and the tracker, git and the database each refuse
    or cut at it somewhere down the line."""
    if b"\\u0000" not in body:
        return False
    try:
        data = read_json(body)
    except UNREADABLE_JSON:
        return False
    return _any_nul(data)


def _any_nul(value: Any) -> bool:
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, str):
            if "\x00" in item:
                return True
        elif isinstance(item, dict):
            stack.extend(item.keys())
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
    return False


def _headers_only(send: Send) -> Send:
    """`send` for a HEAD request: the answer's status and headers, no body."""

    async def headers_only(message: Message) -> None:
        if message.get("type") == "http.response.body":
            message = {**message, "body": b""}
        await send(message)

    return headers_only


def _with_length(headers: Any, length: int) -> list[tuple[bytes, bytes]]:
    kept = [(name, value) for name, value in headers if name != b"content-length"]
    return [*kept, (b"content-length", str(length).encode())]


def _replay(body: bytes, receive: Receive) -> Receive:
    sent = False

    async def replay() -> Message:
        nonlocal sent
        if sent:
            return await receive()
        sent = True
        return {"type": "http.request", "body": body, "more_body": False}

    return replay
