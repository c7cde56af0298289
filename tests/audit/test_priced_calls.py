"""A model call over Anthropic's real wire format, recorded by the run's event sink, reaches
the audit priced with its cache reads and writes at their own rates."""

from __future__ import annotations

import pytest

from agent_harness.audit.cost import cost
from agent_harness.audit.ingest import ingest_work_store
from agent_harness.audit.pricing import Usage, price
from agent_harness.models.client import ModelClient
from agent_harness.models.routes import Route
from agent_harness.pipeline.launch import model_events
from agent_harness.store.database import Store
from agent_harness.store.model_events import ModelCall
from agent_harness.testing.clock import FakeClock
from agent_harness.testing.model_server import ModelServer
from agent_harness.testing.scripted_turns import ScriptedCompletion
from tests.audit.conftest import PROJECT

pytestmark = pytest.mark.integration


@pytest.mark.parametrize("stream", [False, True])
def test_cache_reads_and_writes_from_the_wire_are_priced(
    sqlite_work: Store, sqlite_audit: Store, clock: FakeClock, stream: bool
) -> None:
    with ModelServer(api_key="k") as server:
        server.enqueue(
            ScriptedCompletion(
                text="LGTM",
                input_tokens=500,  # Anthropic's uncached part only
                cached_tokens=8_000,
                cache_write_tokens=1_500,
                output_tokens=400,
            )
        )
        route = Route("claude-sonnet-4-5", server.url, "anthropic", "anthropic", "KEY")
        client = ModelClient(
            {"reviewer": route},
            env={"KEY": "k"},
            parking=sqlite_work,
            events=model_events(sqlite_work, PROJECT),
            clock=clock,
            sleep=clock.sleep,
        )
        client.complete(
            "reviewer", [{"role": "user", "content": "review"}], worker="w", stream=stream
        )
    ingest_work_store(sqlite_work, sqlite_audit)
    [line] = cost(sqlite_audit).lines
    assert (line.tokens_in, line.cache_read, line.cache_write) == (10_000, 8_000, 1_500)
    expected = price("anthropic", "claude-sonnet-4-5", Usage(10_000, 400, 8_000, 1_500), clock())
    assert line.cost_usd == pytest.approx(expected.cost_usd, abs=1e-9)
    assert line.unknown_calls == 0


def test_a_route_named_openai_that_called_groq_is_priced_at_groqs_rates(
    sqlite_work: Store, sqlite_audit: Store, clock: FakeClock
) -> None:
    # A reviewer's route: OpenAI's wire format and vendor name, Groq's address and model.
    call = ModelCall(
        role="reviewer",
        worker="w",
        vendor="openai",
        model="llama-3.3-70b-versatile",
        endpoint="https://api.groq.com/openai/v1",
        attempt=1,
        tokens_in=12_000,
        tokens_out=900,
    )
    sqlite_work.append_event(PROJECT, "T1", call)
    ingest_work_store(sqlite_work, sqlite_audit)
    [line] = cost(sqlite_audit).lines
    expected = price("groq", "llama-3.3-70b-versatile", Usage(12_000, 900), clock())
    assert expected.cost_usd is not None and expected.cost_usd > 0
    assert line.cost_usd == pytest.approx(expected.cost_usd, abs=1e-12)
    assert line.unknown_calls == 0  # was: 1, "no price known" (OpenAI sells no such model)
