"""What `run` builds from its settings: the implementer's time limits."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from agent_harness.config import Settings
from agent_harness.implement.cli_agent import CliImplementer
from agent_harness.pipeline.launch import RunRequest, build_implementer
from agent_harness.sessions.headless import HeadlessHost

pytestmark = pytest.mark.unit


def test_a_cli_agent_gets_the_configured_timeout_and_idle_time(tmp_path: Path) -> None:
    # The soak sets both short: an agent silent at a question is said to wait for input after
    # agent_idle_s, and its session is ended at agent_timeout_s.
    settings = Settings()
    settings.budgets.agent_timeout_s = 4.0
    settings.budgets.agent_idle_s = 1.5
    agent = f"{sys.executable} x.py {{prompt_file}}"
    request = RunRequest(repo="o/r", work=None, plan_path=None, agent=agent)
    built = build_implementer(
        "o/r:PLAN", request, HeadlessHost(tmp_path), {"PATH": str(Path(sys.executable).parent)},
        settings, None, None,  # type: ignore[arg-type]
    )  # fmt: skip
    assert isinstance(built, CliImplementer)
    assert (built.timeout_s, built.idle_s) == (4.0, 1.5)
