"""Call a model by role; retry, wait or stop according to what the provider said.

Every answer goes through the vendor's classifier (`providers`), and the class decides the
reaction: bursts, overloads and server faults are retried with full-jitter backoff inside the
calling worker only; a spent window parks the endpoint for every worker until its reset
(`parking`), and so does a spent cap, until its reset or until a person clears it; refusals,
auth and bad input stop at once with `ModelCallFailed`.
"""

from __future__ import annotations

import contextlib
import json
import random
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from types import MappingProxyType
from typing import Any, NoReturn

from agent_harness.errors import ConfigError, HarnessError
from agent_harness.models.bodies import snippet
from agent_harness.models.failures import Failure, FailureKind
from agent_harness.models.parking import UNTIL_CLEARED, EndpointParked, ParkingStore
from agent_harness.models.providers import classifier_for
from agent_harness.models.routes import (
    MissingApiKey,
    RoleMap,
    Route,
    UnknownRole,
    load_routes_from_file,
)
from agent_harness.models.transport import (
    HttpRequest,
    HttpxTransport,
    Transport,
    TransportFailed,
)
from agent_harness.models.wire import Completion, build_request, parse_completion

EventSink = Callable[[str, dict[str, Any]], None]


class ModelCallFailed(HarnessError):
    """A model call failed in a way waiting will not fix (or retries ran out)."""

    def __init__(self, failure: Failure, role: str, model: str, attempts: int) -> None:
        self.failure = failure
        self.role = role
        self.model = model
        self.attempts = attempts
        tries = f"after {attempts} attempts" if attempts > 1 else "on the first attempt"
        super().__init__(f"{role} call to {model} failed {tries}: {failure.describe()}")


@dataclass(frozen=True)
class RetryPolicy:
    """Backoff for retryable failures: wait uniform(0, min(cap_s, base_s * 2**n)) but at least
    what the provider asked. A wait longer than `park_after_s` parks the endpoint instead of
    holding a worker; a window without a stated reset parks for `default_window_s`. No wait
    or window is taken as longer than `longest_wait_s` (the longest limit a vendor names, a
    week): a proxy's `retry-after: 99999999999` would otherwise park a key for millennia."""

    max_attempts: int = 5
    base_s: float = 1.0
    cap_s: float = 60.0
    park_after_s: float = 300.0
    default_window_s: float = 3600.0
    longest_wait_s: float = 7 * 86400.0


# Tokens a provider adds around each message (its role, its separators): a generous bound.
_FRAMING_TOKENS = 16


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
        # Until an endpoint has answered once, its calls go one at a time: a spent cap then
        # costs one request, not one per worker that asked at the same moment.
        self._proven: set[str] = set()
        self._first: dict[str, threading.Lock] = {}
        self._first_lock = threading.Lock()

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
        """Ask the model that serves `role`, retrying what a wait can fix.

        Raises `UnknownRole` or `MissingApiKey` before any request, `EndpointParked` when the
        endpoint's window is spent, and `ModelCallFailed` when no retry is left or allowed.
        """
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
            # The gate holds the request and what its answer decides (a park), never a backoff.
            with self._first_contact(route.parking_key):
                self._raise_if_parked(route, base)
                attempt += 1
                started = self._clock()
                outcome = self._attempt(route, request, stream, key)
                latency = max(0.0, self._clock() - started)
                if isinstance(outcome, Completion):
                    self._proven.add(route.parking_key)
                    return self._succeeded(outcome, base, attempt, latency)
                wait = self._wait_before_retry(route, outcome, base, attempt, latency)
                if wait is None:
                    self._give_up(role, route, outcome, base, attempt, latency)
            self._sleep(wait)

    def worst_case_usd(
        self,
        role: str,
        messages: Sequence[Mapping[str, Any]],
        *,
        system: str | None = None,
        max_tokens: int = 1024,
    ) -> float | None:
        """The most the call `complete` would make could cost by the price list, checked before
        it is paid for: every byte sent counted as an input token (no token is less than a
        byte of text; each message's framing allowed for) and `max_tokens` out at the output
        rate. None when the price of the role's model is not known."""
        from agent_harness.audit.pricing import Usage, call_cost

        route = self._routes.get(role)
        if route is None:
            raise UnknownRole(role, list(self._routes))
        sent = json.dumps([system, list(messages)], ensure_ascii=False).encode("utf-8")
        usage = Usage(len(sent) + _FRAMING_TOKENS * (len(messages) + 1), max_tokens)
        return call_cost(route.vendor, route.endpoint, route.model, usage, time.time())

    # -- internals ---------------------------------------------------------------------------

    def _first_contact(self, key: str) -> contextlib.AbstractContextManager[object]:
        """The endpoint's one-at-a-time gate until it has answered once; then no gate."""
        if key in self._proven:
            return contextlib.nullcontext()
        with self._first_lock:
            return self._first.setdefault(key, threading.Lock())

    def _succeeded(
        self, completion: Completion, base: dict[str, Any], attempt: int, latency: float
    ) -> Completion:
        done = replace(completion, latency_s=latency, cost_usd=_priced(completion, base))
        self._emit(
            "model.call",
            base,
            attempt=attempt,
            tokens_in=done.tokens_in,
            tokens_out=done.tokens_out,
            tokens_cached=done.tokens_cached,
            tokens_cache_write=done.tokens_cache_write,
            latency_s=latency,
            stop_reason=done.stop_reason,
            failure=None,
        )
        return done

    def _wait_before_retry(
        self, route: Route, failure: Failure, base: dict[str, Any], attempt: int, latency: float
    ) -> float | None:
        """Seconds to sleep before trying again, or None when this failure is final.

        A spent window, or a wait too long to hold a worker for, parks the endpoint instead
        (raising `EndpointParked`), so other workers learn of it too.
        """
        if failure.kind is FailureKind.CAP:
            # A spent cap answers every item the same: one request found it, none follows
            # until its reset or until a person clears it.
            self._park(route, failure.reset_at or UNTIL_CLEARED, failure, base, attempt, latency)
        if failure.kind is FailureKind.WINDOW:
            until = failure.reset_at or self._clock() + self.policy.default_window_s
            # A reset already in the past (clock skew) still means "not now": hold briefly.
            until = max(until, self._clock() + 1.0)
            until = min(until, self._clock() + self.policy.longest_wait_s)
            self._park(route, until, failure, base, attempt, latency)
        if not failure.retryable or attempt >= self.policy.max_attempts:
            return None
        wait = min(self._backoff(attempt - 1, failure), self.policy.longest_wait_s)
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
        return wait

    def _give_up(
        self,
        role: str,
        route: Route,
        failure: Failure,
        base: dict[str, Any],
        attempt: int,
        latency: float,
    ) -> NoReturn:
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
    ) -> NoReturn:
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


def _priced(done: Completion, base: Mapping[str, Any]) -> float | None:
    """The call's cost by the price list, as the audit prices its `model.call` event (whoever
    its endpoint bills, else the route's vendor; its model; today's prices): budgets count it
    before the next call is paid for, where a provider reports no cost of its own."""
    from agent_harness.audit.pricing import Usage, call_cost

    usage = Usage(done.tokens_in, done.tokens_out, done.tokens_cached, done.tokens_cache_write)
    vendor, endpoint, model = base.get("vendor"), base.get("endpoint"), base.get("model")
    return call_cost(vendor, endpoint, model, usage, time.time())
