"""An inception session over a real SQLite file and the scripted planner on loopback, reached
through the real model client (OpenAI's wire format). Time is a fake clock."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from agent_harness.config import DEFAULT_PROTECTED
from agent_harness.inception.planner import Planner
from agent_harness.inception.session import InceptionSession, model_events
from agent_harness.models.client import ModelClient, RetryPolicy
from agent_harness.models.routes import Route
from agent_harness.models.transport import HttpxTransport
from agent_harness.store.database import Store, open_store
from agent_harness.testing.clock import FakeClock
from agent_harness.testing.model_server import ModelServer, ScriptedResponder
from agent_harness.testing.planner_rules import inception_rules

KEY = "sk-planner-test-0123456789"
TALLY = (
    "tally is a tiny Python library that counts words and lines in a text. "
    "Add word_count(text) in tally/words.py, tested by tests/test_words.py. "
    "Add line_count(text) in tally/lines.py, tested by tests/test_lines.py. "
    "Should a trailing newline start a new line? Leave README.md alone."
)


@dataclass
class Rig:
    store: Store
    server: ModelServer
    clock: FakeClock
    path: Path
    transport: HttpxTransport

    def planner(self, session_id: str, protected: tuple[str, ...] = DEFAULT_PROTECTED) -> Planner:
        route = Route("gpt-planner", f"{self.server.url}/v1", "openai", "openai", "PLANNER_KEY")
        client = ModelClient(
            {"planner": route},
            env={"PLANNER_KEY": KEY},
            parking=self.store,
            events=model_events(self.store, session_id),
            clock=self.clock,
            sleep=self.clock.sleep,
            policy=RetryPolicy(max_attempts=3),
            transport=self.transport,  # one connection pool for every session of the test
        )
        return Planner(client, protected=protected)

    def start(self, paragraph: str = TALLY) -> InceptionSession:
        session = InceptionSession.start(self.store, paragraph, "openai:gpt-planner")
        session.planner = self.planner(session.id)
        return session


@pytest.fixture
def rig(tmp_path: Path, clock: FakeClock) -> Iterator[Rig]:
    """The scripted planner answers every request unless a test queues turns before it."""
    store = open_store(f"sqlite:///{tmp_path / 'harness.sqlite'}", clock=clock)
    transport = HttpxTransport()
    with ModelServer([ScriptedResponder(inception_rules)], api_key=KEY) as server:
        yield Rig(store, server, clock, tmp_path / "harness.sqlite", transport)
    transport.close()
    store.close()
