"""A spent cap (insufficient_quota) on the reviewer: one request, then every item waits for a
person, with its attempts intact, and nothing is asked of the endpoint until it is unparked."""

from __future__ import annotations

import json
import shlex
from pathlib import Path

import pytest

from agent_harness.cli import main
from agent_harness.pipeline.settings import RunSettings
from agent_harness.testing.agents import write_scripted_agent
from agent_harness.testing.model_server import ScriptedFailure

from .conftest import KEY_ENV, REPO, Harness, use_the_cli

pytestmark = pytest.mark.integration

PLAN = "### A1: One\n\n### A2: Two\n\n### A3: Three\n"


def test_a_spent_cap_costs_one_request_and_its_items_wait_for_a_person(
    harness: Harness, capsys: pytest.CaptureFixture[str]
) -> None:
    h = harness
    agent = write_scripted_agent(
        h.tmp / "agents",
        {"steps": [{"write_file": {"path": "NOTES.md", "content": "noted\n"}}], "exit": 0},
    )
    command = shlex.join(agent) + " {prompt_file}"
    settings = RunSettings(checks=[], lease_s=60.0, idle_poll_s=0.02, workers=2)
    h.model.enqueue_first(ScriptedFailure.openai_insufficient_quota())

    first = h.pipeline(PLAN, agent=command, settings=settings).run()
    assert len(h.reviews()) == 1  # one request met the cap; no item asked again
    assert [(i.state, i.attempts) for i in first.items] == [("waiting", 0)] * 3
    endpoint = f"{h.model.url}/v1"
    for item in first.items:
        assert f"agent-harness work unpark {endpoint}" in (item.reason or ""), item.reason
    assert h.store.parked(f"{endpoint}#{KEY_ENV}") is not None  # in the store, for every run

    again = h.pipeline(PLAN, agent=command, settings=settings).run()
    assert len(h.reviews()) == 1 and [i.state for i in again.items] == ["waiting"] * 3

    db = str(h.tmp / "harness.sqlite")
    assert main(["work", "unpark", endpoint, "--db", db]) == 0
    assert capsys.readouterr().out.strip() == (
        f"unparked {endpoint}#{KEY_ENV}; items that may run again: A1, A2, A3"
    )
    assert main(["work", "unpark", endpoint, "--db", db]) == 2
    assert "is not parked (nothing is parked)" in capsys.readouterr().err

    h.clock.advance(5)  # the command ran on the real clock, a moment after the harness's
    done = h.pipeline(PLAN, agent=command, settings=settings).run()
    assert [(i.state, i.attempts) for i in done.items] == [("pr_open", 1)] * 3
    assert len(h.reviews()) == 4
    agent_runs = [e for e in h.store.all_events() if e.kind == "agent_started"]
    assert len(agent_runs) == 3  # the agents' work waited; none was paid for twice


def test_a_run_that_ends_with_items_waiting_on_a_spent_cap_exits_75(
    harness: Harness, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys
) -> None:
    # Exit 0 would read as "all done" to a script or a CI job; 75 says come back later.
    use_the_cli(harness, tmp_path, monkeypatch)
    (tmp_path / "PLAN.md").write_text(PLAN)
    agent = write_scripted_agent(
        tmp_path / "agents",
        {"steps": [{"write_file": {"path": "NOTES.md", "content": "noted\n"}}], "exit": 0},
    )
    harness.model.enqueue_first(ScriptedFailure.openai_insufficient_quota())
    args = ["run", "--repo", REPO, "--work", str(harness.work), "--plan", "PLAN.md"]
    args += ["--agent", shlex.join(agent) + " {prompt_file}", "--reviewer", "openai:gpt-test"]
    assert main([*args, "--json"]) == 75
    finished = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert [item["state"] for item in finished["items"]] == ["waiting"] * 3
