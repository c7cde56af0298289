"""A pull request whose create answer is lost is found, not opened twice."""

from __future__ import annotations

import shlex

import pytest

from agent_harness.forge import FaultKind
from agent_harness.pipeline.settings import RunSettings
from agent_harness.testing.agents import write_scripted_agent
from agent_harness.testing.forge import TOKEN
from agent_harness.tracker.github import GitHubTracker

from .conftest import REPO, Harness

pytestmark = pytest.mark.integration


def test_a_pull_request_held_past_the_client_timeout_is_opened_once(harness: Harness) -> None:
    h = harness
    agent = shlex.join(write_scripted_agent(h.tmp / "agents", "done")) + " {prompt_file}"
    pipeline = h.pipeline(
        "### T1: Count words\n",
        agent=agent,
        settings=RunSettings(checks=[], lease_s=60.0, idle_poll_s=0.02, max_attempts=1),
    )
    pipeline.parts.tracker = GitHubTracker(
        REPO, TOKEN, h.forge.server.api_url, write_spacing_s=0.0, timeout_s=1.0
    )
    h.forge.forge.faults.inject(FaultKind.LATENCY, "POST", "*/pulls", delay_s=2.5, count=1)
    [item] = pipeline.run().items
    assert item.state == "pr_open", item.reason
    assert [p.head.ref for p in h.pulls()] == ["agent-harness/T1-count-words"]
    pipeline.parts.tracker.close()  # type: ignore[attr-defined]
