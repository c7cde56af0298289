"""The soak's model providers: bursts, spent windows with their resets, spent caps, on a
virtual clock, so a schedule of many days runs in seconds.

Each provider is a ModelServer on loopback speaking Anthropic's Messages format, whose answer
to every request is decided by a schedule read off a FakeClock it shares with the caller: at
most `burst` requests a virtual minute (429 with retry-after to the next minute), at most
`window` a five-hour window (the unified window, rejected with its reset), at most `cap` a
virtual day (the monthly spend limit, refused until a person raises it: the soak unparks the
endpoint at the next midnight, as `agent-harness work unpark` would). The caller is the
harness's own ModelClient, parking in a real SQLite store and sleeping on the same clock. Every
request is counted where it lands, with what it was answered; one that arrives while its
provider has said "wait" (before a burst's retry-after, inside a spent window, at a spent cap
before it was raised) is counted against the client.
"""

from __future__ import annotations

import collections
import random
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from agent_harness.models.client import ModelCallFailed, ModelClient
from agent_harness.models.parking import EndpointParked, unpark
from agent_harness.models.routes import Route
from agent_harness.store.database import open_store
from agent_harness.testing.clock import FakeClock
from agent_harness.testing.model_server import (
    ModelServer,
    ScriptedCompletion,
    ScriptedFailure,
    ScriptedResponder,
    ScriptedTurn,
)

DAY, WINDOW, MINUTE = 86400.0, 5 * 3600.0, 60.0
KEY_ENV = "ANTHROPIC_API_KEY"


@dataclass
class Provider:
    """One scripted provider and what reached it."""

    name: str
    clock: FakeClock
    burst: int  # requests a minute
    window: int  # requests a five-hour window
    cap: int  # requests a day, then refused until raised
    used: collections.Counter[tuple[str, int]] = field(default_factory=collections.Counter)
    answers: collections.Counter[str] = field(default_factory=collections.Counter)
    blocked_until: float = 0.0  # what the last refusal told the caller to wait for
    capped: bool = False  # the cap is spent and nobody has raised it yet
    early: list[str] = field(default_factory=list)  # requests that came while told to wait
    lock: threading.Lock = field(default_factory=threading.Lock)

    def respond(self, _body: Any) -> ScriptedTurn:
        with self.lock:
            now = self.clock()
            if self.capped:
                self.early.append(f"{self.name}: asked again at {_at(now)} with its cap spent")
            elif now < self.blocked_until:
                self.early.append(f"{self.name}: asked at {_at(now)}, told to wait until "
                                  f"{_at(self.blocked_until)}")  # fmt: skip
            day, window, minute = int(now // DAY), int(now // WINDOW), int(now // MINUTE)
            if self.capped or self.used["day", day] >= self.cap:
                self.capped = True
                return self._say("cap", ScriptedFailure.anthropic_spend_cap())
            if self.used["window", window] >= self.window:
                reset = (window + 1) * WINDOW
                self.blocked_until = reset
                return self._say("window", ScriptedFailure.anthropic_unified_window(reset))
            if self.used["minute", minute] >= self.burst:
                wait = (minute + 1) * MINUTE - now
                self.blocked_until = now + wait
                return self._say("burst", ScriptedFailure.anthropic_rate_limit(retry_after=wait))
            for unit, index in (("day", day), ("window", window), ("minute", minute)):
                self.used[unit, index] += 1
            return self._say("answered", ScriptedCompletion(text="looks right"))

    def _say(self, what: str, turn: ScriptedTurn) -> ScriptedTurn:
        self.answers[what] += 1
        return turn

    def raise_cap(self) -> bool:
        """A person raises a spent cap; True if it was spent."""
        with self.lock:
            spent, self.capped = self.capped, False
        return spent


def _at(t: float) -> str:
    return f"day {int(t // DAY)} {int(t % DAY // 3600):02d}:{int(t % 3600 // 60):02d}"


@dataclass
class ProviderSoak:
    days: float = 0.0
    calls: int = 0  # ModelClient calls made
    outcomes: collections.Counter[str] = field(default_factory=collections.Counter)
    answers: collections.Counter[str] = field(default_factory=collections.Counter)  # by kind
    caps_raised: int = 0
    early: list[str] = field(default_factory=list)


def soak_providers(root: Path, days: int, seed: int) -> ProviderSoak:
    """`days` virtual days of calls, one every few virtual minutes to each of two providers."""
    rng = random.Random(seed)
    clock = FakeClock(start=1_800_000_000.0 - 1_800_000_000.0 % DAY)  # a midnight
    providers = [
        Provider("provider A", clock, burst=3, window=40, cap=150),
        Provider("provider B", clock, burst=2, window=25, cap=90),
    ]
    result = ProviderSoak()
    servers = [ModelServer([ScriptedResponder(p.respond)]) for p in providers]
    store = open_store(str(root / "providers.sqlite"), clock=clock)
    try:
        for server in servers:
            server.__enter__()
        routes = {
            f"role{n}": Route("claude-test", server.url, "anthropic", "anthropic", KEY_ENV)
            for n, server in enumerate(servers)
        }
        client = ModelClient(routes, env={KEY_ENV: "sk-ant-soak"}, parking=store, clock=clock,
                             sleep=clock.sleep, rng=rng)  # fmt: skip
        start = clock()
        midnight = start + DAY
        while clock() < start + days * DAY:
            # Now and then a rush: several workers ask within the same minute.
            for _ in range(rng.randint(2, 6) if rng.random() < 0.2 else 1):
                for role in routes:
                    result.calls += 1
                    result.outcomes[_call(client, role)] += 1
            clock.advance(rng.uniform(30, 240))
            if clock() >= midnight:  # a person raises every spent cap once a day
                midnight += DAY
                for provider, route in zip(providers, routes.values(), strict=True):
                    if provider.raise_cap():
                        unpark(store, route.endpoint)
                        result.caps_raised += 1
        result.days = (clock() - start) / DAY
    finally:
        store.close()
        for server in servers:
            server.__exit__(None, None, None)
    for provider in providers:
        result.answers.update(provider.answers)
        result.early += provider.early
    return result


def _call(client: ModelClient, role: str) -> str:
    try:
        client.complete(role, [{"role": "user", "content": "review this"}], worker="soak/w1")
    except EndpointParked:
        return "parked (no request)"
    except ModelCallFailed as exc:
        return f"failed: {exc.failure.kind}"
    return "answered"
