"""An API over a real SQLite file: a project with items in every interesting state."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from agent_harness.api.app import create_app
from agent_harness.api.context import ApiContext
from agent_harness.api.pools import ProjectPools
from agent_harness.config import Settings
from agent_harness.git.runner import git
from agent_harness.queue.items import enqueue
from agent_harness.queue.leases import claim_next, fail
from agent_harness.store.database import Store, open_store
from agent_harness.store.events import AgentStarted, ModelCall
from agent_harness.testing.clock import FakeClock
from tests.shared.stores import item

TOKEN = "test-token-0123456789abcdef"
PROJECT = "me/app:PLAN"
AUTH = {"Authorization": f"Bearer {TOKEN}"}


def seed(store: Store, clock: FakeClock) -> None:
    """T1 claimed (live), T2 failed, T3 waits on T2 (skipped), T4 pending; events to read."""
    enqueue(store, PROJECT, [item("T1"), item("T2"), item("T3", "T2"), item("T4")])
    t1 = claim_next(store, PROJECT, "host-a/w1", 600)
    assert t1 is not None and t1.item_id == "T1"
    store.append_event(
        PROJECT, "T1", AgentStarted(implementer="claude", session="ah-app-T1", attempt=1)
    )
    t2 = claim_next(store, PROJECT, "host-a/w2", 600)
    assert t2 is not None and t2.item_id == "T2"
    fail(store, t2, "checks failed", permanent=True, failure="check_failed")
    store.append_event(
        PROJECT,
        None,
        ModelCall(role="reviewer", vendor="openai", failure="window", failure_message="quota"),
    )


@pytest.fixture
def api_store(db_dir: Path, clock: FakeClock) -> Iterator[Store]:
    store = open_store(str(db_dir / "api.sqlite"), clock=clock)
    seed(store, clock)
    try:
        yield store
    finally:
        store.close()


def client_for(ctx: ApiContext, **options: object) -> TestClient:
    return TestClient(create_app(ctx, token=TOKEN, **options))  # type: ignore[arg-type]


@pytest.fixture
def monitoring(api_store: Store) -> TestClient:
    return client_for(ApiContext(store=api_store, mode="monitoring"))


@pytest.fixture
def supervised(api_store: Store, db_dir: Path) -> Iterator[TestClient]:
    settings = Settings(state_dir=str(db_dir / "state"), sessions={"host": "headless"})
    # `start` refuses agents not installed: stand-ins for the two presets these tests name
    # (their passes fail, or are stopped, before any agent would run).
    bin_dir = db_dir / "agents-on-path"
    bin_dir.mkdir(exist_ok=True)
    for name in ("claude", "codex"):
        (bin_dir / name).write_text("#!/bin/sh\nexit 0\n")
        (bin_dir / name).chmod(0o755)
    env = {**os.environ, "PATH": f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}"}
    pools = ProjectPools(api_store, settings, idle_s=3600, env=env)
    ctx = ApiContext(
        store=api_store, mode="supervised", pools=pools, work_root=db_dir, settings=settings
    )
    try:
        yield client_for(ctx)
    finally:
        pools.close()


@pytest.fixture
def clone(db_dir: Path) -> Path:
    """A git clone with a plan in it, under the server's work root."""
    work = db_dir / "clone"
    work.mkdir()
    git(work, "init", "-q")
    (work / "PLAN.md").write_text("# Plan\n\n### T1: First\n\nDo it.\n", encoding="utf-8")
    return work
