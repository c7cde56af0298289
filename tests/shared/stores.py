"""Stores for the store, queue and CLI tests: one `store` per engine, and items to put in it.

Registered for the whole suite by tests/conftest.py, since the tests that need a store live
in several packages.
"""

from __future__ import annotations

import functools
import os
import tempfile
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from agent_harness.plan.model import WorkItem
from agent_harness.store.database import Store, open_store
from agent_harness.testing.clock import FakeClock

PG_DEFAULT = "postgresql://postgres@127.0.0.1:5432/test"


def pg_url() -> str:
    return os.environ.get("AGENT_HARNESS_TEST_PG") or PG_DEFAULT


@functools.cache
def pg_problem(url: str) -> str | None:
    import psycopg

    try:
        psycopg.connect(url, connect_timeout=3).close()
    except psycopg.Error:
        return f"PostgreSQL not reachable at {url} (set AGENT_HARNESS_TEST_PG)"
    return None


@dataclass(frozen=True)
class Engine:
    name: str
    url: str
    schema: str | None

    def open(self, **kwargs: object) -> Store:
        return open_store(self.url, schema=self.schema, **kwargs)  # type: ignore[arg-type]


def cli_url(engine: Engine) -> str:
    """A PostgreSQL engine's database as a user names it to the CLI: its schema on the search
    path."""
    path = f"-csearch_path%3D{engine.schema}"
    if "options=" in engine.url:  # the engine's own options (synchronous_commit) stay
        return engine.url.replace("options=", f"options={path}%20", 1)
    sep = "&" if "?" in engine.url else "?"
    return f"{engine.url}{sep}options={path}"


def _drop_schema(url: str, schema: str) -> None:
    import psycopg
    from psycopg import sql

    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(schema)))


@pytest.fixture
def db_dir() -> Iterator[Path]:
    """A private directory: pytest's shared tmp tree can be pruned by other runs mid-test."""
    with tempfile.TemporaryDirectory(prefix="ah-store-") as name:
        yield Path(name)


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def engine(request: pytest.FixtureRequest, db_dir: Path) -> Iterator[Engine]:
    if request.param == "sqlite":
        yield Engine("sqlite", str(db_dir / "harness.sqlite"), None)
        return
    yield from _postgres_engine()


@pytest.fixture
def pg_engine() -> Iterator[Engine]:
    """PostgreSQL alone, for what only happens with more than one writer at a time."""
    yield from _postgres_engine()


def _postgres_engine() -> Iterator[Engine]:
    url = pg_url()
    problem = pg_problem(url)
    if problem:
        pytest.skip(problem)
    schema = f"ah_test_{uuid.uuid4().hex[:12]}"
    # Tests check what is committed, not that it survives a power cut: skipping the WAL
    # flush per commit keeps the load tests inside their time budget on a busy disk.
    sep = "&" if "?" in url else "?"
    fast = f"{url}{sep}options=-csynchronous_commit%3Doff"
    try:
        yield Engine("postgres", fast, schema)
    finally:
        _drop_schema(url, schema)


@pytest.fixture
def sqlite_engine(db_dir: Path) -> Engine:
    return Engine("sqlite", str(db_dir / "harness.sqlite"), None)


@pytest.fixture
def store(engine: Engine, clock: FakeClock) -> Iterator[Store]:
    opened = engine.open(clock=clock)
    try:
        yield opened
    finally:
        opened.close()


def item(item_id: str, *deps: str, title: str | None = None, done: bool = False) -> WorkItem:
    return WorkItem(
        id=item_id,
        title=title or f"do {item_id}",
        line=1,
        form="heading",
        depends_on=deps,
        done=done,
    )
