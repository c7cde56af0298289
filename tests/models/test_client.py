"""The model client, end to end: real httpx to the scripted server on loopback.

Time is a fake clock whose `sleep` advances it, so a 5-hour window passes in microseconds and
no test waits for real except the one proving that a hung server times out.
"""

from __future__ import annotations

import json
import random
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from agent_harness.errors import ConfigError
from agent_harness.models.client import ModelCallFailed, ModelClient, RetryPolicy
from agent_harness.models.failures import FailureKind
from agent_harness.models.parking import EndpointParked, MemoryParking
from agent_harness.models.routes import MissingApiKey, Route, UnknownRole, load_routes_from_file
from agent_harness.testing.clock import FakeClock
from agent_harness.testing.model_server import (
    ModelServer,
    ScriptedCompletion,
    ScriptedDisconnect,
    ScriptedFailure,
    ScriptedHang,
    ScriptedToolCall,
)

KEY = "sk-ant-test-0123456789"
NOW = 1_767_225_600.0
USER = [{"role": "user", "content": "Say hi"}]


class ThreadedClock(FakeClock):
    """The shared fake clock, also noting which thread slept how long."""

    def __init__(self) -> None:
        super().__init__(start=NOW)
        self.sleeps: list[tuple[str, float]] = []

    def sleep(self, seconds: float) -> None:
        self.sleeps.append((threading.current_thread().name, seconds))
        super().sleep(seconds)


class Harness:
    def __init__(self, server: ModelServer, **policy: Any) -> None:
        self.server = server
        self.time = ThreadedClock()
        self.events: list[tuple[str, dict[str, Any]]] = []
        self.parking = MemoryParking(self.time)
        self.routes = {
            "reviewer": Route("claude-test", server.url, "anthropic", "anthropic", "ANTH_KEY"),
            "implementer": Route("gpt-test", server.url + "/v1", "openai", "openai", "OAI_KEY"),
        }
        self.client = ModelClient(
            self.routes,
            env={"ANTH_KEY": KEY, "OAI_KEY": KEY},
            parking=self.parking,
            events=lambda kind, payload: self.events.append((kind, payload)),
            clock=self.time,
            sleep=self.time.sleep,
            rng=random.Random(7),
            policy=RetryPolicy(**policy),
        )

    def kinds(self, kind: str) -> list[dict[str, Any]]:
        return [payload for k, payload in self.events if k == kind]


@pytest.fixture
def server() -> Iterator[ModelServer]:
    with ModelServer(api_key=KEY) as running:
        yield running


@pytest.fixture
def h(server: ModelServer) -> Harness:
    return Harness(server)


# ------------------------------------------------------------------------------ success paths


@pytest.mark.integration
def test_anthropic_call_sends_the_messages_api_and_reports_usage(h: Harness) -> None:
    h.server.enqueue(
        ScriptedCompletion(text="Hi there", input_tokens=20, output_tokens=4, cached_tokens=15)
    )
    done = h.client.complete("reviewer", USER, worker="w1", system="Be brief", max_tokens=50)
    assert done.text == "Hi there"
    assert (done.model, done.vendor, done.stop_reason) == ("claude-test", "anthropic", "end_turn")
    assert (done.tokens_in, done.tokens_out, done.tokens_cached) == (35, 4, 15)
    [request] = h.server.requests
    assert request.path == "/v1/messages"
    assert request.headers["anthropic-version"] == "2023-06-01"
    assert request.body == {
        "model": "claude-test",
        "max_tokens": 50,
        "messages": USER,
        "system": "Be brief",
    }
    [event] = h.kinds("model.call")
    assert event["role"] == "reviewer" and event["worker"] == "w1"
    assert event["tokens_in"] == 35 and event["failure"] is None


@pytest.mark.integration
def test_openai_call_prepends_the_system_message(h: Harness) -> None:
    h.server.enqueue(ScriptedCompletion(text="ok", input_tokens=9, output_tokens=1))
    done = h.client.complete("implementer", USER, worker="w1", system="sys")
    assert done.text == "ok" and done.stop_reason == "stop"
    assert (done.tokens_in, done.tokens_out) == (9, 1)
    assert done.tokens_cached is None  # not reported is unknown, not zero
    [request] = h.server.requests
    assert request.path == "/v1/chat/completions"
    assert request.body["messages"][0] == {"role": "system", "content": "sys"}


@pytest.mark.integration
def test_unknown_usage_is_none_in_the_event_never_zero(h: Harness) -> None:
    h.server.enqueue(ScriptedCompletion(text="x", input_tokens=None, output_tokens=None))
    h.client.complete("implementer", USER, worker="w1")
    [event] = h.kinds("model.call")
    assert event["tokens_in"] is None and event["tokens_out"] is None


@pytest.mark.integration
@pytest.mark.parametrize("role", ["reviewer", "implementer"])
def test_streaming_assembles_text_tool_calls_and_usage(h: Harness, role: str) -> None:
    h.server.enqueue(
        ScriptedCompletion(
            text="Reading the file",
            input_tokens=30,
            output_tokens=6,
            tool_calls=(ScriptedToolCall("read_file", {"path": "src/a.py"}, "call_9"),),
        )
    )
    done = h.client.complete(role, USER, worker="w1", stream=True)
    assert done.text == "Reading the file"
    assert [(c.id, c.name, dict(c.arguments)) for c in done.tool_calls] == [
        ("call_9", "read_file", {"path": "src/a.py"})
    ]
    assert (done.tokens_in, done.tokens_out) == (30, 6)
    assert h.server.requests[0].body["stream"] is True


@pytest.mark.integration
def test_no_key_reaches_events_or_error_lines(h: Harness) -> None:
    echo = ScriptedFailure.openai(
        401, f"Incorrect API key provided: {KEY}.", "invalid_request_error", "invalid_api_key"
    )
    h.server.enqueue(ScriptedCompletion(text="fine"), echo)
    h.client.complete("implementer", USER, worker="w1")
    with pytest.raises(ModelCallFailed) as caught:
        h.client.complete("implementer", USER, worker="w1")
    assert caught.value.failure.kind is FailureKind.AUTH
    assert KEY not in str(caught.value)
    assert KEY not in json.dumps(h.events)


# ------------------------------------------------------------------------------ retries


@pytest.mark.integration
def test_burst_waits_at_least_retry_after_then_succeeds(h: Harness) -> None:
    h.server.enqueue(
        ScriptedFailure.anthropic_rate_limit(retry_after=7),
        ScriptedCompletion(text="after the wait"),
    )
    done = h.client.complete("reviewer", USER, worker="w1")
    assert done.text == "after the wait"
    assert len(h.server.requests) == 2
    [(sleeper, waited)] = h.time.sleeps
    assert sleeper == "MainThread"
    assert waited >= 7
    [retry] = h.kinds("model.retry")
    assert retry["failure"] == "burst" and retry["worker"] == "w1"


@pytest.mark.integration
def test_backoff_is_full_jitter_under_an_exponential_ceiling(server: ModelServer) -> None:
    h = Harness(server, base_s=2.0, cap_s=5.0, max_attempts=5)
    server.enqueue(*[ScriptedFailure.openai_server_error()] * 4, ScriptedCompletion(text="ok"))
    h.client.complete("implementer", USER, worker="w1")
    waits = [seconds for _, seconds in h.time.sleeps]
    ceilings = [2.0, 4.0, 5.0, 5.0]
    assert len(waits) == 4
    assert all(0.0 <= w <= c for w, c in zip(waits, ceilings, strict=True))
    assert len(set(waits)) == 4  # jittered, not a fixed schedule


@pytest.mark.integration
def test_retries_are_bounded(server: ModelServer) -> None:
    h = Harness(server, max_attempts=3)
    server.enqueue(*[ScriptedFailure.anthropic_overloaded()] * 3, ScriptedCompletion(text="late"))
    with pytest.raises(ModelCallFailed) as caught:
        h.client.complete("reviewer", USER, worker="w1")
    assert caught.value.failure.kind is FailureKind.OVERLOAD
    assert caught.value.attempts == 3
    assert len(server.requests) == 3
    assert "\n" not in str(caught.value)


@pytest.mark.integration
def test_one_workers_429_never_pauses_another(h: Harness) -> None:
    """Worker A is mid-backoff (its sleep blocks) while worker B's call completes."""
    b_done = threading.Event()
    a_sleeping = threading.Event()
    real_sleep = h.time.sleep

    def sleep(seconds: float) -> None:
        a_sleeping.set()
        assert b_done.wait(5), "worker B was held up by worker A's backoff"
        real_sleep(seconds)

    h.client._sleep = sleep  # the injected sleep, swapped for this scenario
    h.server.enqueue(
        ScriptedFailure.anthropic_rate_limit(retry_after=30),
        ScriptedCompletion(text="B"),
        ScriptedCompletion(text="A"),
    )
    results: dict[str, str] = {}

    def run(worker: str) -> None:
        results[worker] = h.client.complete("reviewer", USER, worker=worker).text

    a = threading.Thread(target=run, args=("A",), name="A")
    a.start()
    assert a_sleeping.wait(5)
    b = threading.Thread(target=run, args=("B",), name="B")
    b.start()
    b.join(5)
    b_done.set()
    a.join(5)
    assert results == {"A": "A", "B": "B"}
    assert [who for who, _ in h.time.sleeps] == ["A"]
    assert [e["worker"] for e in h.kinds("model.retry")] == ["A"]


# ------------------------------------------------------------------------------ never retried


@pytest.mark.integration
@pytest.mark.parametrize(
    ("role", "turn", "kind"),
    [
        ("reviewer", ScriptedFailure.anthropic_auth(), FailureKind.AUTH),
        ("reviewer", ScriptedFailure.anthropic_prompt_too_long(), FailureKind.CONTEXT_TOO_LONG),
        ("implementer", ScriptedFailure.openai_context_length(), FailureKind.CONTEXT_TOO_LONG),
        (
            "reviewer",
            ScriptedCompletion(text="I can't", stop_reason="refusal"),
            FailureKind.REFUSAL,
        ),
    ],
)
def test_final_failures_make_exactly_one_request(
    h: Harness, role: str, turn: Any, kind: FailureKind
) -> None:
    h.server.enqueue(turn, ScriptedCompletion(text="must not be reached"))
    with pytest.raises(ModelCallFailed) as caught:
        h.client.complete(role, USER, worker="w1")
    assert caught.value.failure.kind is kind
    assert len(h.server.requests) == 1
    assert h.time.sleeps == []
    [event] = h.kinds("model.call")
    assert event["failure"] == kind.value


@pytest.mark.integration
@pytest.mark.parametrize(
    ("role", "turn"),
    [
        ("implementer", ScriptedFailure.openai_insufficient_quota()),
        ("reviewer", ScriptedFailure.anthropic_spend_cap()),
    ],
)
def test_a_spent_cap_parks_its_endpoint_until_a_person_clears_it(
    h: Harness, role: str, turn: Any
) -> None:
    from agent_harness.models.parking import UNTIL_CLEARED, unpark

    h.server.enqueue(turn, ScriptedCompletion(text="after the cap was raised"))
    with pytest.raises(EndpointParked) as caught:
        h.client.complete(role, USER, worker="w1")
    assert caught.value.failure is not None and caught.value.failure.kind is FailureKind.CAP
    assert caught.value.until == UNTIL_CLEARED
    endpoint = h.routes[role].endpoint
    assert f"parked until a person clears it (agent-harness work unpark {endpoint})" in str(
        caught.value
    )
    # A day later, another worker: still parked, and not one more request.
    h.time.now += 86400
    for worker in ("w2", "w3"):
        with pytest.raises(EndpointParked):
            h.client.complete(role, USER, worker=worker)
    assert len(h.server.requests) == 1 and h.time.sleeps == []
    assert unpark(h.parking, endpoint) == [h.routes[role].parking_key]
    assert h.client.complete(role, USER, worker="w2").text == "after the cap was raised"


# ------------------------------------------------------------------------------ windows


@pytest.mark.integration
def test_a_five_hour_window_parks_the_endpoint_for_every_worker(h: Harness) -> None:
    reset = NOW + 5 * 3600
    h.server.enqueue(ScriptedFailure.anthropic_unified_window(reset=reset, windows=("5h",)))
    with pytest.raises(EndpointParked) as first:
        h.client.complete("reviewer", USER, worker="w1")
    assert first.value.until == reset
    assert first.value.failure is not None and first.value.failure.kind is FailureKind.WINDOW
    # Another worker fails fast, without a request, while the window is spent.
    h.time.now = reset - 1
    with pytest.raises(EndpointParked):
        h.client.complete("reviewer", USER, worker="w2")
    assert len(h.server.requests) == 1
    [fast] = [e for e in h.kinds("model.call") if e.get("parked")]
    assert (fast["worker"], fast["failure"], fast["parked_until"]) == ("w2", "window", reset)
    # The other endpoint is not affected.
    h.server.enqueue(ScriptedCompletion(text="other endpoint"))
    assert h.client.complete("implementer", USER, worker="w2").text == "other endpoint"
    # Once the window resets, calls flow again.
    h.time.now = reset + 1
    h.server.enqueue(ScriptedCompletion(text="back"))
    assert h.client.complete("reviewer", USER, worker="w2").text == "back"
    assert h.time.sleeps == []
    assert h.kinds("model.parked")[0]["parked_until"] == reset


@pytest.mark.integration
def test_a_retry_after_longer_than_the_park_threshold_parks_instead_of_sleeping(
    server: ModelServer,
) -> None:
    h = Harness(server, park_after_s=60)
    server.enqueue(ScriptedFailure.anthropic_rate_limit(retry_after=900))
    with pytest.raises(EndpointParked) as caught:
        h.client.complete("reviewer", USER, worker="w1")
    assert caught.value.until == pytest.approx(NOW + 900)
    assert h.time.sleeps == []


@pytest.mark.integration
@pytest.mark.parametrize(
    "turn",
    [
        ScriptedFailure.anthropic_rate_limit(retry_after=99_999_999_999),
        ScriptedFailure.anthropic_unified_window(reset=NOW + 10 * 365 * 86400, windows=("7d",)),
    ],
)
def test_a_wait_no_vendor_names_parks_for_a_week_not_for_millennia(
    server: ModelServer, turn: Any
) -> None:
    # A proxy's bug would otherwise park the key past every reset a vendor has.
    h = Harness(server)
    server.enqueue(turn)
    with pytest.raises(EndpointParked) as caught:
        h.client.complete("reviewer", USER, worker="w1")
    assert caught.value.until == pytest.approx(NOW + 7 * 86400)


# ------------------------------------------------------------------------------ bad input


@pytest.mark.integration
def test_unknown_role_names_the_role_and_the_known_ones(h: Harness) -> None:
    with pytest.raises(UnknownRole) as caught:
        h.client.complete("planner", USER, worker="w1")
    assert "'planner'" in str(caught.value) and "reviewer" in str(caught.value)
    assert h.server.requests == []


@pytest.mark.integration
def test_missing_key_names_the_variable(server: ModelServer) -> None:
    client = ModelClient(
        {"reviewer": Route("m", server.url, "anthropic", "anthropic", "NOT_SET_KEY")},
        env={"OTHER": KEY},
        parking=MemoryParking(),
    )
    with pytest.raises(MissingApiKey) as caught:
        client.complete("reviewer", USER, worker="w1")
    assert "$NOT_SET_KEY" in str(caught.value)
    assert server.requests == []


@pytest.mark.integration
@pytest.mark.parametrize(
    ("turn", "raw_code", "status", "text"),
    [
        (ScriptedFailure.html_bad_gateway(), None, 502, "502 Bad Gateway"),
        (ScriptedFailure.malformed_json(), "malformed_response", 200, "not JSON"),
        (ScriptedCompletion(text=""), "empty_completion", 200, "empty completion"),
        (ScriptedDisconnect(), "reset", None, "dropped"),
        (ScriptedCompletion(text="partial answer", cut_after_events=3), "reset", None, "dropped"),
    ],
)
def test_broken_answers_are_classified_as_server_faults(
    server: ModelServer, turn: Any, raw_code: str | None, status: int | None, text: str
) -> None:
    h = Harness(server, max_attempts=1)
    server.enqueue(turn)
    with pytest.raises(ModelCallFailed) as caught:
        h.client.complete(
            "reviewer",
            USER,
            worker="w1",
            stream=isinstance(turn, ScriptedCompletion) and turn.cut_after_events is not None,
        )
    failure = caught.value.failure
    assert failure.kind is FailureKind.SERVER
    assert failure.raw_code == raw_code and failure.status == status
    assert text in str(caught.value)
    assert "<html" not in str(caught.value) and "\n" not in str(caught.value)


@pytest.mark.integration
def test_a_hung_server_times_out(server: ModelServer) -> None:
    h = Harness(server, max_attempts=1)
    server.enqueue(ScriptedHang(max_s=5))
    with pytest.raises(ModelCallFailed) as caught:
        h.client.complete("implementer", USER, worker="w1", timeout=0.2)
    assert caught.value.failure.raw_code == "timeout"


@pytest.mark.integration
def test_an_html_502_is_retried_like_any_server_fault(h: Harness) -> None:
    h.server.enqueue(ScriptedFailure.html_bad_gateway(), ScriptedCompletion(text="through"))
    assert h.client.complete("implementer", USER, worker="w1").text == "through"


# ------------------------------------------------------------------------------ routes


@pytest.mark.integration
def test_reload_swaps_routes_without_a_restart(h: Harness) -> None:
    h.server.enqueue(ScriptedCompletion(text="one"), ScriptedCompletion(text="two"))
    h.client.complete("reviewer", USER, worker="w1")
    swapped = dict(
        h.routes,
        reviewer=Route("gpt-reviewer", h.server.url + "/v1", "openai", "openai", "OAI_KEY"),
    )
    h.client.reload(swapped)
    done = h.client.complete("reviewer", USER, worker="w1")
    assert done.model == "gpt-reviewer"
    assert [r.path for r in h.server.requests] == ["/v1/messages", "/v1/chat/completions"]


@pytest.mark.integration
def test_routes_load_from_toml_and_reload_from_file(h: Harness, tmp_path: Path) -> None:
    path = tmp_path / "routes.toml"
    path.write_text(
        f'[roles.reviewer]\nmodel = "local-llm"\nvendor = "vllm"\nclassifier = "generic"\n'
        f'endpoint = "{h.server.url}/v1"\napi_key_env = "OAI_KEY"\n',
        encoding="utf-8",
    )
    routes = load_routes_from_file(path)
    assert routes["reviewer"].api_format == "openai"
    h.client.reload_from_file(path)
    h.server.enqueue(ScriptedCompletion(text="local"))
    assert h.client.complete("reviewer", USER, worker="w1").vendor == "vllm"
    with pytest.raises(UnknownRole):
        h.client.complete("implementer", USER, worker="w1")


@pytest.mark.unit
def test_a_routes_file_missing_a_field_says_which(tmp_path: Path) -> None:
    path = tmp_path / "routes.toml"
    path.write_text('[roles.reviewer]\nmodel = "m"\nvendor = "openai"\n', encoding="utf-8")
    with pytest.raises(ConfigError) as caught:
        load_routes_from_file(path)
    assert "roles.reviewer lacks endpoint, api_key_env" in str(caught.value)


@pytest.mark.unit
def test_memory_parking_forgets_an_entry_once_its_time_has_passed() -> None:
    time = FakeClock(start=NOW)
    parking = MemoryParking(time)
    parking.park("https://api.example#KEY", NOW + 10, "window")
    assert parking.parked("https://api.example#KEY") == (NOW + 10, "window")
    time.now = NOW + 10
    assert parking.parked("https://api.example#KEY") is None


@pytest.mark.integration
def test_workers_asking_a_new_endpoint_at_once_spend_one_request_on_a_cap(
    server: ModelServer,
) -> None:
    # The soak of the reviewer's cap found it: two workers asked at the same moment, both
    # requests were on the wire before the first came back, and the cap cost two.
    from agent_harness.models.transport import HttpRequest, HttpResponse, HttpxTransport

    second_sent = threading.Event()

    class Overlapping(HttpxTransport):
        """Holds the first request until a second one is sent (or a moment passes)."""

        def __init__(self) -> None:
            super().__init__()
            self.sent = 0
            self.lock = threading.Lock()

        def send(self, request: HttpRequest) -> HttpResponse:
            with self.lock:
                self.sent += 1
                first = self.sent == 1
            if first:
                second_sent.wait(0.5)  # without a gate, the other worker's request lands here
            else:
                second_sent.set()
            return super().send(request)

    h = Harness(server)
    transport = Overlapping()
    client = ModelClient(
        h.routes,
        env={"OAI_KEY": KEY},
        parking=h.parking,
        transport=transport,
        clock=h.time,
        sleep=h.time.sleep,
    )
    server.enqueue(ScriptedFailure.openai_insufficient_quota())
    outcomes: list[str] = []

    def ask(worker: str) -> None:
        try:
            client.complete("implementer", USER, worker=worker)
            outcomes.append("answered")
        except EndpointParked:
            outcomes.append("parked")

    threads = [threading.Thread(target=ask, args=(w,)) for w in ("w1", "w2")]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    assert outcomes == ["parked", "parked"]
    assert transport.sent == 1 and len(server.requests) == 1


@pytest.mark.integration
def test_a_call_is_priced_by_the_list_for_its_routes_model_and_unknown_stays_none(
    server: ModelServer,
) -> None:
    from genai_prices import Usage as LibUsage
    from genai_prices import calc_price

    from agent_harness.testing.model_server import ScriptedCompletion

    routes = {
        "known": Route("gpt-4.1", server.url + "/v1", "openai", "openai", "OAI_KEY"),
        "unknown": Route("gpt-test", server.url + "/v1", "openai", "openai", "OAI_KEY"),
    }
    client = ModelClient(routes, env={"OAI_KEY": KEY}, parking=MemoryParking())
    try:
        for _ in range(2):
            server.enqueue(ScriptedCompletion(text="ok", input_tokens=10_000, output_tokens=500))
        known = client.complete("known", [{"role": "user", "content": "hi"}], worker="w")
        unknown = client.complete("unknown", [{"role": "user", "content": "hi"}], worker="w")
    finally:
        client.close()
    listed = calc_price(
        LibUsage(input_tokens=10_000, output_tokens=500), model_ref="gpt-4.1", provider_id="openai"
    ).total_price
    assert known.cost_usd == pytest.approx(float(listed)) and known.cost_usd > 0
    assert unknown.cost_usd is None  # no price known: unknown, never 0
