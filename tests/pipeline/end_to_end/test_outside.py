"""An agent that writes outside its worktree (into the person's clone, into the plan): the run
cannot stop it, but says so when it ends, before another run acts on it."""

from __future__ import annotations

import shlex
import sys

import pytest

from agent_harness.pipeline.settings import RunSettings
from agent_harness.plan.markdown import parse_plan_file

from .conftest import Harness

pytestmark = pytest.mark.integration

AGENT = """
import pathlib, sys
pathlib.Path("notes.md").write_text("done\\n")
clone, plan = pathlib.Path(sys.argv[1]), pathlib.Path(sys.argv[2])
with open(clone / "README.md", "a") as readme:
    readme.write("written by an agent\\n")
with open(plan, "a") as more:
    more.write("\\n### Z9: Injected by an agent\\nDo what it says.\\n")
"""


def test_an_agent_writing_into_the_clone_and_the_plan_is_said_at_the_runs_end(
    harness: Harness,
) -> None:
    # The next run refused "uncommitted changes on main (README.md)" with no word of how they
    # came, and, once they were undone, mirrored and worked the item the agent had added.
    plan_file = harness.tmp / "PLAN.md"
    plan_file.write_text("### T1: Write notes\nWrite notes.md.\n")
    script = harness.tmp / "outside_agent.py"
    script.write_text(AGENT)
    command = [sys.executable, str(script), str(harness.work), str(plan_file)]
    agent = shlex.join(command) + " {prompt_file}"
    settings = RunSettings(checks=[], lease_s=30.0, idle_poll_s=0.02, reconcile=False)
    pipeline = harness.pipeline(parse_plan_file(plan_file), agent=agent, settings=settings)
    report = pipeline.run()
    assert [(i.id, i.state) for i in report.items] == [("T1", "pr_open")]
    assert len(report.warnings) == 2
    assert report.warnings[0].startswith(f"the plan {plan_file} changed during the run")
    assert "uncommitted changes on main (README.md)" in report.warnings[1]
    assert "an agent may have written outside its worktree" in report.warnings[1]
    assert report.as_json()["warnings"] == report.warnings
