"""Call a model by role; retry, wait or stop according to what the provider said.

Callers name a role (planner, implementer, reviewer), never a model: a swappable route map
says which model, endpoint and key serve it. Every answer goes through the vendor's classifier
(`providers`), and the class decides the reaction: bursts, overloads and server faults are
retried with full-jitter backoff inside the calling worker only; a spent window parks the
endpoint for every worker until its reset; caps, refusals, auth and bad input stop at once.
"""

from __future__ import annotations

import json
import random
import threading
import time
import tomllib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from pathlib import Path
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, Literal, Protocol

from agent_harness.errors import ConfigError, HarnessError
from agent_harness.models.providers import (
    Failure,
    FailureKind,
    classifier_for,
    json_documents,
    snippet,
)

if TYPE_CHECKING:
    import httpx

ApiFormat = Literal["anthropic", "openai"]
EventSink = Callable[[str, dict[str, Any]], None]
ANTHROPIC_VERSION = "2023-06-01"


# ---------------------------------------------------------------------------------------------
# Routes


@dataclass(frozen=True)
class Route:
    """Where a role's calls go. `classifier` names the vendor whose failure rules apply
    (default: `vendor`), e.g. `generic` for a self-hosted OpenAI-compatible server."""

    model: str
    endpoint: str
    vendor: str
    api_format: ApiFormat
    api_key_env: str
    classifier: str | None = None

    @property
    def parking_key(self) -> str:
        # A window is an account's budget at one endpoint: two keys at one URL are two budgets.
        return f"{self.endpoint.rstrip('/')}#{self.api_key_env}"


RoleMap = Mapping[str, Route]

# vendor -> (default endpoint, wire format, key variable, base-URL variable)
VENDOR_DEFAULTS: dict[str, tuple[str, ApiFormat, str, str]] = {
    "openai": ("https://api.openai.com/v1", "openai", "OPENAI_API_KEY", "OPENAI_BASE_URL"),
    "anthropic": (
        "https://api.anthropic.com",
        "anthropic",
        "ANTHROPIC_API_KEY",
        "ANTHROPIC_BASE_URL",
    ),
    "openrouter": (
        "https://openrouter.ai/api/v1",
        "openai",
        "OPENROUTER_API_KEY",
        "OPENROUTER_BASE_URL",
    ),
    "gemini": (
        "https://generativelanguage.googleapis.com/v1beta/openai",
        "openai",
        "GEMINI_API_KEY",
        "GEMINI_BASE_URL",
    ),
}


def route_from_spec(spec: str, env: Mapping[str, str]) -> Route:
    """A route from `vendor:model` (e.g. `openai:gpt-4.1`), with the vendor's usual endpoint,
    key variable and base-URL override variable (OPENAI_BASE_URL, ANTHROPIC_BASE_URL, ...)."""
    vendor, sep, model = spec.partition(":")
    vendor = vendor.strip().lower()
    if not sep or not model.strip():
        raise ConfigError(
            f"model route '{spec}' should look like vendor:model, e.g. openai:gpt-4.1"
        )
    if vendor not in VENDOR_DEFAULTS:
        known = ", ".join(sorted(VENDOR_DEFAULTS))
        raise ConfigError(f"unknown vendor '{vendor}' in '{spec}' (known: {known})")
    endpoint, api_format, key_env, base_env = VENDOR_DEFAULTS[vendor]
    return Route(
        model=model.strip(),
        endpoint=env.get(base_env) or endpoint,
        vendor=vendor,
        api_format=api_format,
        api_key_env=key_env,
    )


def load_routes_from_file(path: Path | str) -> dict[str, Route]:
    """Read `[roles.<role>]` tables (model, vendor, endpoint, api_key_env, api_format?,
    classifier?) from a TOML file."""
    source = Path(path)
    try:
        data = tomllib.loads(source.read_text(encoding="utf-8"))
    except OSError as exc:
        raise ConfigError(f"cannot read routes file {source}: {exc.strerror}") from exc
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"routes file {source} is not valid TOML: {exc}") from exc
    roles = data.get("roles")
    if not isinstance(roles, dict) or not roles:
        raise ConfigError(f"routes file {source} has no [roles.<name>] tables")
    routes: dict[str, Route] = {}
    for role, table in roles.items():
        if not isinstance(table, dict):
            raise ConfigError(f"routes file {source}: roles.{role} must be a table")
        missing = [k for k in ("model", "vendor", "endpoint", "api_key_env") if k not in table]
        if missing:
            raise ConfigError(f"routes file {source}: roles.{role} lacks {', '.join(missing)}")
        vendor = str(table["vendor"])
        api_format = str(
            table.get("api_format", "anthropic" if vendor == "anthropic" else "openai")
        )
        if api_format not in ("anthropic", "openai"):
            raise ConfigError(
                f"routes file {source}: roles.{role}.api_format must be anthropic or openai"
            )
        routes[role] = Route(
            model=str(table["model"]),
            endpoint=str(table["endpoint"]),
            vendor=vendor,
            api_format="anthropic" if api_format == "anthropic" else "openai",
            api_key_env=str(table["api_key_env"]),
            classifier=str(table["classifier"]) if "classifier" in table else None,
        )
    return routes


# ---------------------------------------------------------------------------------------------
# Errors


class UnknownRole(ConfigError):
    """No route serves this role."""

    def __init__(self, role: str, known: Sequence[str]) -> None:
        self.role = role
        self.known = tuple(known)
        listed = ", ".join(sorted(known)) or "none"
        super().__init__(f"no model route for role {role!r} (routes exist for: {listed})")


class MissingApiKey(ConfigError):
    """A route's API key variable is not set."""

    def __init__(self, role: str, variable: str) -> None:
        self.role = role
        self.variable = variable
        super().__init__(
            f"the model route for role {role!r} reads its API key from ${variable}, "
            "which is not set"
        )


class EndpointParked(HarnessError):
    """A model endpoint is parked until its usage window resets."""

    exit_code = 75  # EX_TEMPFAIL: come back later

    def __init__(
        self, endpoint: str, until: float, reason: str, failure: Failure | None = None
    ) -> None:
        self.endpoint = endpoint
        self.until = until
        self.reason = reason
        self.failure = failure
        when = datetime.fromtimestamp(until, UTC).strftime("%Y-%m-%d %H:%M:%S UTC")
        super().__init__(f"model endpoint {endpoint} is parked until {when}: {reason}")


class ModelCallFailed(HarnessError):
    """A model call failed in a way waiting will not fix (or retries ran out)."""

    def __init__(self, failure: Failure, role: str, model: str, attempts: int) -> None:
        self.failure = failure
        self.role = role
        self.model = model
        self.attempts = attempts
        tries = f"after {attempts} attempts" if attempts > 1 else "on the first attempt"
        super().__init__(f"{role} call to {model} failed {tries}: {failure.describe()}")


class TransportFailed(HarnessError):
    """The HTTP exchange itself failed: timeout, refused or reset connection."""

    def __init__(
        self, reason: Literal["timeout", "connect", "reset", "protocol"], url: str, detail: str
    ) -> None:
        self.reason = reason
        self.url = url
        super().__init__(f"{reason} talking to {url}: {detail}")


# ---------------------------------------------------------------------------------------------
# Parking


class ParkingStore(Protocol):
    """Where parked endpoints are recorded; `agent_harness.store.database` implements it durably."""

    def park(self, key: str, until: float, reason: str) -> None: ...

    def parked(self, key: str) -> tuple[float, str] | None: ...


class MemoryParking:
    """Parking shared by the workers of one process, forgotten when it exits."""

    def __init__(self, clock: Callable[[], float] = time.time) -> None:
        self._clock = clock
        self._lock = threading.Lock()
        self._parked: dict[str, tuple[float, str]] = {}

    def park(self, key: str, until: float, reason: str) -> None:
        with self._lock:
            self._parked[key] = (until, reason)

    def parked(self, key: str) -> tuple[float, str] | None:
        with self._lock:
            entry = self._parked.get(key)
        if entry is None or entry[0] <= self._clock():
            return None
        return entry


# ---------------------------------------------------------------------------------------------
# Transport


@dataclass(frozen=True)
class HttpRequest:
    method: str
    url: str
    headers: Mapping[str, str]
    json_body: Any
    timeout: float
    stream: bool = False


@dataclass(frozen=True)
class HttpResponse:
    status: int
    headers: Mapping[str, str]
    body: bytes


class Transport(Protocol):
    """Sends one request and returns the whole response, or raises `TransportFailed`."""

    def send(self, request: HttpRequest) -> HttpResponse: ...


class HttpxTransport:
    """The default transport. The deadline covers the whole exchange, so a server that
    trickles a stream forever still ends at `timeout`."""

    def __init__(self, client: httpx.Client | None = None) -> None:
        import httpx

        self._httpx = httpx
        self._client = client or httpx.Client(follow_redirects=False)

    def close(self) -> None:
        self._client.close()

    def send(self, request: HttpRequest) -> HttpResponse:
        httpx = self._httpx
        deadline = time.monotonic() + request.timeout
        try:
            with self._client.stream(
                request.method,
                request.url,
                headers=dict(request.headers),
                json=request.json_body,
                timeout=httpx.Timeout(request.timeout),
            ) as response:
                chunks: list[bytes] = []
                for chunk in response.iter_bytes():
                    chunks.append(chunk)
                    if time.monotonic() > deadline:
                        raise TransportFailed(
                            "timeout", request.url, f"no complete answer in {request.timeout}s"
                        )
                return HttpResponse(response.status_code, dict(response.headers), b"".join(chunks))
        except httpx.TimeoutException as exc:
            raise TransportFailed(
                "timeout", request.url, f"no answer in {request.timeout}s ({type(exc).__name__})"
            ) from exc
        except httpx.ConnectError as exc:
            raise TransportFailed("connect", request.url, str(exc) or "connection refused") from exc
        except (httpx.ReadError, httpx.RemoteProtocolError, httpx.WriteError) as exc:
            raise TransportFailed(
                "reset", request.url, f"connection dropped mid-answer ({exc or type(exc).__name__})"
            ) from exc
        except httpx.HTTPError as exc:
            raise TransportFailed("protocol", request.url, str(exc) or type(exc).__name__) from exc


# ---------------------------------------------------------------------------------------------
# Results


@dataclass(frozen=True)
class ToolCall:
    id: str
    name: str
    arguments: Mapping[str, Any]


@dataclass(frozen=True)
class Completion:
    """A model's answer. Token counts are None when the provider did not say (never 0)."""

    text: str
    model: str
    vendor: str
    tokens_in: int | None
    tokens_out: int | None
    tokens_cached: int | None
    stop_reason: str | None
    latency_s: float
    raw: Any = field(repr=False, default=None)
    tool_calls: tuple[ToolCall, ...] = ()


@dataclass(frozen=True)
class RetryPolicy:
    """Backoff for retryable failures: wait uniform(0, min(cap_s, base_s * 2**n)) but at least
    what the provider asked. A wait longer than `park_after_s` parks the endpoint instead of
    holding a worker; a window without a stated reset parks for `default_window_s`."""

    max_attempts: int = 5
    base_s: float = 1.0
    cap_s: float = 60.0
    park_after_s: float = 300.0
    default_window_s: float = 3600.0


# ---------------------------------------------------------------------------------------------
# The client


class ModelClient:
    """Role-addressed model calls with per-worker retries and per-endpoint parking.

    Retry state lives in the calling worker's own call, so one worker's backoff never delays
    another; the only shared state is the `ParkingStore`, which is exactly what a spent
    window should share.
    """

    def __init__(
        self,
        routes: RoleMap,
        *,
        env: Mapping[str, str],
        parking: ParkingStore,
        transport: Transport | None = None,
        events: EventSink | None = None,
        clock: Callable[[], float] = time.time,
        sleep: Callable[[float], None] = time.sleep,
        rng: random.Random | None = None,
        policy: RetryPolicy | None = None,
    ) -> None:
        self._routes: Mapping[str, Route] = MappingProxyType(dict(routes))
        self._env = env
        self._parking = parking
        self._transport = transport if transport is not None else HttpxTransport()
        self._events = events or (lambda kind, payload: None)
        self._clock = clock
        self._sleep = sleep
        self._rng = rng or random.Random()
        self._rng_lock = threading.Lock()
        self.policy = policy or RetryPolicy()

    def close(self) -> None:
        """Release the transport's connections (the default transport pools them)."""
        closer = getattr(self._transport, "close", None)
        if callable(closer):
            closer()

    @property
    def routes(self) -> Mapping[str, Route]:
        return self._routes

    def secret_values(self) -> tuple[str, ...]:
        """The API keys this client sends, whatever variables hold them, so the harness can
        keep them out of check environments and diffs. Never log or show them."""
        keys = (self._env.get(route.api_key_env, "") for route in self._routes.values())
        return tuple(key for key in keys if key)

    def reload(self, routes: RoleMap) -> None:
        """Swap the whole route map at once; calls already running keep the map they started
        with, new calls see only the new one."""
        fresh = MappingProxyType(dict(routes))
        for role, route in fresh.items():
            if not isinstance(route, Route):
                raise ConfigError(f"route for role {role!r} is not a Route")
        self._routes = fresh

    def reload_from_file(self, path: Path | str) -> None:
        self.reload(load_routes_from_file(path))

    # -- the call ----------------------------------------------------------------------------

    def complete(
        self,
        role: str,
        messages: Sequence[Mapping[str, Any]],
        *,
        worker: str,
        system: str | None = None,
        max_tokens: int = 1024,
        timeout: float = 120.0,
        stream: bool = False,
    ) -> Completion:
        routes = self._routes  # one snapshot per call: a reload mid-call cannot mix routes
        route = routes.get(role)
        if route is None:
            raise UnknownRole(role, list(routes))
        key = self._env.get(route.api_key_env)
        if not key:
            raise MissingApiKey(role, route.api_key_env)
        request = build_request(route, key, messages, system, max_tokens, timeout, stream)
        base = {
            "role": role,
            "model": route.model,
            "vendor": route.vendor,
            "endpoint": route.endpoint,
            "worker": worker,
        }
        attempt = 0
        while True:
            self._raise_if_parked(route, base)
            attempt += 1
            started = self._clock()
            outcome = self._attempt(route, request, stream, key)
            latency = max(0.0, self._clock() - started)
            if isinstance(outcome, Completion):
                done = replace(outcome, latency_s=latency)
                self._emit(
                    "model.call",
                    base,
                    attempt=attempt,
                    tokens_in=done.tokens_in,
                    tokens_out=done.tokens_out,
                    tokens_cached=done.tokens_cached,
                    latency_s=latency,
                    stop_reason=done.stop_reason,
                    failure=None,
                )
                return done
            failure = outcome
            if failure.kind is FailureKind.WINDOW:
                until = failure.reset_at or self._clock() + self.policy.default_window_s
                # A reset already in the past (clock skew) still means "not now": hold briefly.
                until = max(until, self._clock() + 1.0)
                self._park(route, until, failure, base, attempt, latency)
            if failure.retryable and attempt < self.policy.max_attempts:
                wait = self._backoff(attempt - 1, failure)
                if wait > self.policy.park_after_s:
                    self._park(route, self._clock() + wait, failure, base, attempt, latency)
                self._emit(
                    "model.retry",
                    base,
                    attempt=attempt,
                    wait_s=wait,
                    failure=failure.kind.value,
                    failure_message=failure.describe(),
                    latency_s=latency,
                )
                self._sleep(wait)
                continue
            self._emit(
                "model.call",
                base,
                attempt=attempt,
                tokens_in=None,
                tokens_out=None,
                tokens_cached=None,
                latency_s=latency,
                stop_reason=None,
                failure=failure.kind.value,
                failure_message=failure.describe(),
            )
            raise ModelCallFailed(failure, role, route.model, attempt)

    # -- internals ---------------------------------------------------------------------------

    def _attempt(
        self, route: Route, request: HttpRequest, stream: bool, key: str
    ) -> Completion | Failure:
        try:
            response = self._transport.send(request)
        except TransportFailed as exc:
            return Failure(
                FailureKind.SERVER,
                route.vendor,
                None,
                _scrub(exc.message, key),
                raw_code=exc.reason,
            )
        classify = classifier_for(route.classifier or route.vendor)
        failure = classify(response.status, response.headers, response.body, self._clock())
        if failure is None and not 200 <= response.status < 300:
            failure = Failure(
                FailureKind.SERVER,
                route.vendor,
                response.status,
                snippet(response.body) or f"HTTP {response.status}",
            )
        if failure is not None:
            return replace(failure, message=_scrub(failure.message, key))
        return parse_completion(route, response, stream)

    def _backoff(self, retry_number: int, failure: Failure) -> float:
        ceiling = min(self.policy.cap_s, self.policy.base_s * (2**retry_number))
        with self._rng_lock:
            wait = self._rng.uniform(0.0, ceiling)
        floor = failure.retry_after
        if floor is None and failure.reset_at is not None:
            floor = max(0.0, failure.reset_at - self._clock())
        return max(wait, floor or 0.0)

    def _raise_if_parked(self, route: Route, base: dict[str, Any]) -> None:
        entry = self._parking.parked(route.parking_key)
        if entry is None or entry[0] <= self._clock():
            return
        until, reason = entry
        self._emit(
            "model.call",
            base,
            attempt=0,
            tokens_in=None,
            tokens_out=None,
            tokens_cached=None,
            latency_s=0.0,
            stop_reason=None,
            failure=FailureKind.WINDOW.value,
            failure_message=reason,
            parked_until=until,
            parked=True,
        )
        raise EndpointParked(route.endpoint, until, reason)

    def _park(
        self,
        route: Route,
        until: float,
        failure: Failure,
        base: dict[str, Any],
        attempt: int,
        latency: float,
    ) -> None:
        reason = failure.describe()
        current = self._parking.parked(route.parking_key)
        if current is None or current[0] < until:
            self._parking.park(route.parking_key, until, reason)
        self._emit(
            "model.parked",
            base,
            attempt=attempt,
            parked_until=until,
            failure=failure.kind.value,
            failure_message=reason,
            latency_s=latency,
        )
        raise EndpointParked(route.endpoint, until, reason, failure)

    def _emit(self, kind: str, base: dict[str, Any], **payload: Any) -> None:
        self._events(kind, {**base, **payload})


def _scrub(text: str, key: str) -> str:
    # Some providers echo the key they rejected; it must not reach events or error lines.
    return text.replace(key, "<redacted>") if key else text


# ---------------------------------------------------------------------------------------------
# Wire formats: building requests and reading answers


def build_request(
    route: Route,
    key: str,
    messages: Sequence[Mapping[str, Any]],
    system: str | None,
    max_tokens: int,
    timeout: float,
    stream: bool,
) -> HttpRequest:
    base = route.endpoint.rstrip("/")
    body: dict[str, Any] = {"model": route.model, "max_tokens": max_tokens}
    if route.api_format == "anthropic":
        body["messages"] = [dict(m) for m in messages]
        if system:
            body["system"] = system
        if stream:
            body["stream"] = True
        headers = {
            "x-api-key": key,
            "anthropic-version": ANTHROPIC_VERSION,
            "content-type": "application/json",
        }
        return HttpRequest("POST", f"{base}/v1/messages", headers, body, timeout, stream)
    chat = [{"role": "system", "content": system}] if system else []
    body["messages"] = chat + [dict(m) for m in messages]
    if stream:
        body["stream"] = True
        body["stream_options"] = {"include_usage": True}
    headers = {"authorization": f"Bearer {key}", "content-type": "application/json"}
    return HttpRequest("POST", f"{base}/chat/completions", headers, body, timeout, stream)


def _int_or_none(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _malformed(route: Route, response: HttpResponse, why: str) -> Failure:
    return Failure(
        FailureKind.SERVER,
        route.vendor,
        response.status,
        f"{why}: {snippet(response.body) or 'empty body'}",
        raw_code="malformed_response",
    )


def parse_completion(route: Route, response: HttpResponse, stream: bool) -> Completion | Failure:
    """Read a 2xx answer (JSON or SSE) into a Completion, or say why it is unusable."""
    if stream:
        docs = json_documents(response.body)
        if not docs:
            return _malformed(route, response, "the stream carried no JSON events")
        parsed = (
            _anthropic_stream(route, docs)
            if route.api_format == "anthropic"
            else _openai_stream(route, docs)
        )
        raw: Any = docs
    else:
        try:
            raw = json.loads(response.body)
        except ValueError:
            return _malformed(route, response, "the answer is not JSON")
        if not isinstance(raw, dict):
            return _malformed(route, response, "the answer is not a JSON object")
        parsed = (
            _anthropic_message(route, raw)
            if route.api_format == "anthropic"
            else _openai_message(route, raw)
        )
    if isinstance(parsed, Failure):
        return parsed
    if not parsed.text.strip() and not parsed.tool_calls:
        return Failure(
            FailureKind.SERVER,
            route.vendor,
            response.status,
            f"the model returned an empty completion (stop_reason "
            f"{parsed.stop_reason or 'unknown'})",
            raw_code="empty_completion",
        )
    return replace(parsed, raw=raw)


def _anthropic_usage(usage: Any) -> tuple[int | None, int | None, int | None]:
    if not isinstance(usage, dict):
        return None, None, None
    fresh = _int_or_none(usage.get("input_tokens"))
    created = _int_or_none(usage.get("cache_creation_input_tokens"))
    cached = _int_or_none(usage.get("cache_read_input_tokens"))
    # Anthropic's input_tokens excludes cache reads and writes; the prompt's size is the sum.
    tokens_in = None if fresh is None else fresh + (created or 0) + (cached or 0)
    return tokens_in, _int_or_none(usage.get("output_tokens")), cached


def _anthropic_message(route: Route, raw: dict[str, Any]) -> Completion | Failure:
    content = raw.get("content")
    if not isinstance(content, list):
        return Failure(
            FailureKind.SERVER,
            route.vendor,
            200,
            "the answer has no content list",
            raw_code="malformed_response",
        )
    texts: list[str] = []
    calls: list[ToolCall] = []
    for block in content:
        if not isinstance(block, dict):
            continue
        if block.get("type") == "text":
            texts.append(str(block.get("text", "")))
        elif block.get("type") == "tool_use":
            args = block.get("input")
            calls.append(
                ToolCall(
                    str(block.get("id", "")),
                    str(block.get("name", "")),
                    args if isinstance(args, dict) else {},
                )
            )
    tokens_in, tokens_out, cached = _anthropic_usage(raw.get("usage"))
    return Completion(
        "".join(texts),
        str(raw.get("model") or route.model),
        route.vendor,
        tokens_in,
        tokens_out,
        cached,
        _str_or_none(raw.get("stop_reason")),
        0.0,
        tool_calls=tuple(calls),
    )


def _anthropic_stream(route: Route, docs: list[Any]) -> Completion | Failure:
    model = route.model
    texts: dict[int, list[str]] = {}
    tools: dict[int, tuple[str, str, list[str]]] = {}
    usage: dict[str, Any] = {}
    stop: str | None = None
    finished = False
    for doc in docs:
        if not isinstance(doc, dict):
            continue
        kind = doc.get("type")
        if kind == "message_start" and isinstance(doc.get("message"), dict):
            message = doc["message"]
            model = str(message.get("model") or model)
            if isinstance(message.get("usage"), dict):
                usage.update(message["usage"])
        elif kind == "content_block_start" and isinstance(doc.get("content_block"), dict):
            block, index = doc["content_block"], int(doc.get("index", 0))
            if block.get("type") == "tool_use":
                tools[index] = (str(block.get("id", "")), str(block.get("name", "")), [])
            else:
                texts.setdefault(index, []).append(str(block.get("text", "")))
        elif kind == "content_block_delta" and isinstance(doc.get("delta"), dict):
            delta, index = doc["delta"], int(doc.get("index", 0))
            if delta.get("type") == "text_delta":
                texts.setdefault(index, []).append(str(delta.get("text", "")))
            elif delta.get("type") == "input_json_delta" and index in tools:
                tools[index][2].append(str(delta.get("partial_json", "")))
        elif kind == "message_delta":
            delta = doc.get("delta")
            if isinstance(delta, dict):
                stop = _str_or_none(delta.get("stop_reason")) or stop
            if isinstance(doc.get("usage"), dict):
                usage.update(doc["usage"])
        elif kind == "message_stop":
            finished = True
    if not finished:
        return Failure(
            FailureKind.SERVER,
            route.vendor,
            200,
            "the stream ended before message_stop",
            raw_code="stream_incomplete",
        )
    calls: list[ToolCall] = []
    for index in sorted(tools):
        ident, name, parts = tools[index]
        try:
            args = json.loads("".join(parts) or "{}")
        except ValueError:
            return Failure(
                FailureKind.SERVER,
                route.vendor,
                200,
                f"tool call {name!r} arrived with broken JSON arguments",
                raw_code="malformed_response",
            )
        calls.append(ToolCall(ident, name, args if isinstance(args, dict) else {}))
    text = "".join("".join(texts[i]) for i in sorted(texts))
    tokens_in, tokens_out, cached = _anthropic_usage(usage)
    return Completion(
        text, model, route.vendor, tokens_in, tokens_out, cached, stop, 0.0, tool_calls=tuple(calls)
    )


def _openai_usage(usage: Any) -> tuple[int | None, int | None, int | None]:
    if not isinstance(usage, dict):
        return None, None, None
    details = usage.get("prompt_tokens_details")
    cached = _int_or_none(details.get("cached_tokens")) if isinstance(details, dict) else None
    return (
        _int_or_none(usage.get("prompt_tokens")),
        _int_or_none(usage.get("completion_tokens")),
        cached,
    )


def _openai_message(route: Route, raw: dict[str, Any]) -> Completion | Failure:
    choices = raw.get("choices")
    if not isinstance(choices, list) or not choices or not isinstance(choices[0], dict):
        return Failure(
            FailureKind.SERVER,
            route.vendor,
            200,
            "the answer has no choices",
            raw_code="malformed_response",
        )
    choice = choices[0]
    message = choice.get("message") if isinstance(choice.get("message"), dict) else {}
    assert isinstance(message, dict)
    calls: list[ToolCall] = []
    for call in message.get("tool_calls") or []:
        function = call.get("function") if isinstance(call, dict) else None
        if not isinstance(function, dict):
            continue
        try:
            args = json.loads(function.get("arguments") or "{}")
        except ValueError:
            args = {}
        calls.append(
            ToolCall(
                str(call.get("id", "")),
                str(function.get("name", "")),
                args if isinstance(args, dict) else {},
            )
        )
    tokens_in, tokens_out, cached = _openai_usage(raw.get("usage"))
    return Completion(
        str(message.get("content") or ""),
        str(raw.get("model") or route.model),
        route.vendor,
        tokens_in,
        tokens_out,
        cached,
        _str_or_none(choice.get("finish_reason")),
        0.0,
        tool_calls=tuple(calls),
    )


def _openai_stream(route: Route, docs: list[Any]) -> Completion | Failure:
    model = route.model
    texts: list[str] = []
    tools: dict[int, list[str]] = {}
    tool_meta: dict[int, tuple[str, str]] = {}
    usage: Any = None
    stop: str | None = None
    for doc in docs:
        if not isinstance(doc, dict):
            continue
        model = str(doc.get("model") or model)
        if isinstance(doc.get("usage"), dict):
            usage = doc["usage"]
        for choice in doc.get("choices") or []:
            if not isinstance(choice, dict):
                continue
            stop = _str_or_none(choice.get("finish_reason")) or stop
            delta = choice.get("delta")
            if not isinstance(delta, dict):
                continue
            if isinstance(delta.get("content"), str):
                texts.append(delta["content"])
            for call in delta.get("tool_calls") or []:
                if not isinstance(call, dict):
                    continue
                index = int(call.get("index", 0))
                function = call.get("function") if isinstance(call.get("function"), dict) else {}
                assert isinstance(function, dict)
                if call.get("id") or function.get("name"):
                    tool_meta[index] = (str(call.get("id", "")), str(function.get("name", "")))
                tools.setdefault(index, []).append(str(function.get("arguments") or ""))
    if stop is None:
        return Failure(
            FailureKind.SERVER,
            route.vendor,
            200,
            "the stream ended before a finish_reason",
            raw_code="stream_incomplete",
        )
    calls: list[ToolCall] = []
    for index in sorted(tools):
        ident, name = tool_meta.get(index, ("", ""))
        try:
            args = json.loads("".join(tools[index]) or "{}")
        except ValueError:
            return Failure(
                FailureKind.SERVER,
                route.vendor,
                200,
                f"tool call {name!r} arrived with broken JSON arguments",
                raw_code="malformed_response",
            )
        calls.append(ToolCall(ident, name, args if isinstance(args, dict) else {}))
    tokens_in, tokens_out, cached = _openai_usage(usage)
    return Completion(
        "".join(texts),
        model,
        route.vendor,
        tokens_in,
        tokens_out,
        cached,
        stop,
        0.0,
        tool_calls=tuple(calls),
    )


def _str_or_none(value: Any) -> str | None:
    return value if isinstance(value, str) else None
