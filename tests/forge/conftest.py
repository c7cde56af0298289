"""Fixtures: a forge on loopback in a tmp dir and a PyGithub client for it, on the suite's fake
`clock` (tests/conftest.py)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from agent_harness.testing.clock import FakeClock
from agent_harness.testing.forge import RecordingSleep, RunningForge, running_forge


@pytest.fixture
def sleeps() -> RecordingSleep:
    return RecordingSleep()


@pytest.fixture
def hub(tmp_path: Path, clock: FakeClock, sleeps: RecordingSleep) -> Iterator[RunningForge]:
    with running_forge(tmp_path / "forge", clock=clock, sleep=sleeps) as running:
        yield running
    assert running.forge.server_errors == []  # a 500 from the forge is a bug in the forge


@pytest.fixture
def repo(hub: RunningForge) -> Any:
    return hub.github.get_user().create_repo("demo", auto_init=True)
