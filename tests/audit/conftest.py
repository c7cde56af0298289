"""The audit database on each engine, and a small work log to audit."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from agent_harness.audit.database import open_audit
from agent_harness.store.database import Store, open_store
from agent_harness.store.events import (
    AgentFinished,
    Claimed,
    ModelCall,
    Outcome,
    PullOpened,
    Reviewed,
)
from agent_harness.testing.clock import FakeClock
from tests.shared.stores import Engine, _drop_schema, pg_problem, pg_url

PROJECT = "me/app:PLAN"
HOUR = 3600.0
DAY = 86400.0


@dataclass(frozen=True)
class AuditEngine:
    url: str
    schema: str | None

    def open(self, clock: FakeClock) -> Store:
        return open_audit(self.url, clock=clock, schema=self.schema)


@pytest.fixture
def audit_engine(engine: Engine, db_dir: Path) -> Iterator[AuditEngine]:
    if engine.name == "sqlite":
        yield AuditEngine(str(db_dir / "audit.sqlite"), None)
        return
    schema = f"ah_audit_{uuid.uuid4().hex[:12]}"
    try:
        yield AuditEngine(engine.url, schema)
    finally:
        _drop_schema(pg_url(), schema)


@pytest.fixture
def audit(audit_engine: AuditEngine, clock: FakeClock) -> Iterator[Store]:
    opened = audit_engine.open(clock)
    try:
        yield opened
    finally:
        opened.close()


@pytest.fixture
def sqlite_audit(db_dir: Path, clock: FakeClock) -> Iterator[Store]:
    """The audit database on SQLite only, for tests whose point is not the engine."""
    opened = open_audit(str(db_dir / "audit.sqlite"), clock=clock)
    try:
        yield opened
    finally:
        opened.close()


@pytest.fixture
def sqlite_work(db_dir: Path, clock: FakeClock) -> Iterator[Store]:
    opened = open_store(str(db_dir / "harness.sqlite"), clock=clock)
    try:
        yield opened
    finally:
        opened.close()


def pg_or_skip() -> str:
    url = pg_url()
    problem = pg_problem(url)
    if problem:
        pytest.skip(problem)
    return url


def work_an_item(
    store: Store, clock: FakeClock, item: str, *, approved: bool = True, outcome: str = "merged"
) -> None:
    """One item's life in the work log: a claim, the agent's own report, two reviewer calls
    (one model genai-prices knows, one it does not), a review, a pull request, an outcome."""
    store.append_event(
        PROJECT, item, Claimed(to="claimed", worker="w1", attempt=1, token=1, expires_at=0.0)
    )
    store.append_event(
        PROJECT,
        item,
        AgentFinished(ok=True, state="done", tokens_in=500, tokens_out=50, cost_usd=0.02),
    )
    clock.advance(HOUR)
    store.append_event(
        PROJECT,
        None,
        ModelCall(
            role="reviewer",
            vendor="anthropic",
            model="claude-sonnet-4-5",
            tokens_in=10_000,
            tokens_out=400,
            tokens_cached=8_000,
        ),
    )
    store.append_event(
        PROJECT,
        None,
        ModelCall(role="reviewer", vendor="openai", model="gpt-demo-reviewer", tokens_in=900),
    )
    store.append_event(PROJECT, item, Reviewed(approved=approved, model="claude-sonnet-4-5"))
    store.append_event(PROJECT, item, PullOpened(number=1, url="http://forge/pull/1"))
    clock.advance(2 * HOUR)
    store.append_event(PROJECT, item, Outcome(to=outcome))
