"""`agent-harness control` steers a real `agent-harness run` in another process through the
store: pause stops claiming, resume claims again, drain finishes what is in flight and ends the
run; `control` alone shows what was asked and what the workers do."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from agent_harness.cli import main
from agent_harness.demo.rules import review_rules
from agent_harness.queue.control import get_control, set_control
from agent_harness.store.database import open_store
from agent_harness.testing.model_server import ModelServer, ScriptedResponder
from tests.shared.local_project import make_project, push_to_local_forge, wait_for

pytestmark = pytest.mark.acceptance

PLAN = "".join(f"### P{n}: Note {n}\nWrite p{n}.txt.\n\n" for n in (1, 2, 3))


def run_env(reviewer_url: str) -> dict[str, str]:
    """The environment of a `run` subprocess: ours without our settings, the scripted reviewer."""
    return {
        **{k: v for k, v in os.environ.items() if not k.startswith("AGENT_HARNESS_")},
        "OPENAI_BASE_URL": f"{reviewer_url}/v1",
        "OPENAI_API_KEY": "sk-local",
        "AGENT_HARNESS_SESSIONS__HOST": "headless",
        "AGENT_HARNESS_TRACKER__WRITE_SPACING_S": "0",
    }


def start_run(home: Path, env: dict[str, str], agent: str) -> subprocess.Popen[str]:
    """`agent-harness run --json` of home's plan on the local forge, as its own process."""
    return subprocess.Popen(
        [sys.executable, "-m", "agent_harness", "run", "--repo", "me/app", "--forge", "local",
         "--work", "app", "--plan", "PLAN.md", "--agent", agent,
         "--reviewer", "openai:gpt-test", "--json"],
        cwd=home, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip


def in_process(capsys: pytest.CaptureFixture[str]) -> Callable[..., str]:
    """A command run in this process; what it printed (stderr too, when asked)."""

    def cli(*args: str, stderr: bool = False) -> str:
        code = main(list(args))
        said = capsys.readouterr()
        assert code == 0, said.out + said.err
        return said.out + (said.err if stderr else "")

    return cli


def test_pause_resume_and_drain_steer_a_running_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    home, gates = tmp_path, tmp_path / "gates"
    agent = make_project(home, PLAN)
    monkeypatch.chdir(home)
    with ModelServer([ScriptedResponder(review_rules)]) as reviewer:
        env = run_env(reviewer.url)
        cli = in_process(capsys)  # the other commands: the run is the process they steer

        def pool() -> dict[str, Any]:
            # What `control --json` prints, read in this process: the test polls it often.
            with open_store(str(home / ".agent-harness" / "harness.sqlite")) as store:
                [shown] = get_control(store)
            return {"asked": shown.asked, **(shown.pool.model_dump() if shown.pool else {})}

        push_to_local_forge(home, cli)
        run = start_run(home, env, agent)
        try:
            wait_for("P1 started", (gates / "P1.started").exists, run)
            assert "asked: pause" in cli("control", "pause")
            wait_for("the run paused", lambda: pool().get("state") == "paused", run)
            (gates / "P1.go").write_text("")
            # P1 in flight is finished; nothing new is claimed while the run keeps reporting.
            done = wait_for(
                "P1 handled", lambda: (p := pool())["handled"] == 1 and p["in_flight"] == 0 and p,
                run,
            )  # fmt: skip
            wait_for("two more reports", lambda: pool()["reports"] >= done["reports"] + 2, run)
            assert not (gates / "P2.started").exists()
            assert pool() | {"reports": 0, "at": 0} == done | {"reports": 0, "at": 0}

            cli("control", "resume")
            wait_for("P2 started after resume", (gates / "P2.started").exists, run)
            cli("control", "drain", "--project", "me/app:PLAN")
            wait_for("the run draining", lambda: pool().get("state") == "draining", run)
            (gates / "P2.go").write_text("")
            out, err = run.communicate(timeout=60)
        finally:
            if run.poll() is None:
                run.kill()
                run.communicate()
    assert run.returncode == 0, err
    report = json.loads(out.strip().splitlines()[-1])
    states = {item["id"]: item["state"] for item in report["items"]}
    assert states == {"P1": "pr_open", "P2": "pr_open", "P3": "pending"}
    assert report["drained"] is True
    assert not (gates / "P3.started").exists()
    # The drain was carried out: the next run starts running; the pool said it stopped.
    final = json.loads(cli("control", "--json"))
    assert [(c["project"], c["asked"], c["pool"]["state"]) for c in final] == [
        ("me/app:PLAN", "running", "stopped")
    ]


def test_a_project_not_run_here_yet_can_be_asked_ahead_of_its_first_run(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # The help says "running or not (asked ahead of its next run)"; a project whose plan was
    # synced but that no run has worked yet was refused as "no project".
    from agent_harness.queue.items import enqueue
    from tests.shared.stores import item

    db = str(tmp_path / "h.sqlite")
    with open_store(db) as store:
        enqueue(store, "me/app:PLAN", [item("T1")])
    assert main(["control", "pause", "--project", "me/app:C", "--db", db]) == 0
    said = capsys.readouterr()
    assert "asked: pause; no run works it now: its next run starts so" in said.out
    # Taken as named, and said: a typo (me/app:plan for me/app:PLAN) would pause nothing.
    assert said.err == (
        "warning: me/app:C is no project this database holds yet (it holds me/app:PLAN); "
        "asked ahead of its first run\n"
    )
    with open_store(db) as store:
        [asked] = get_control(store, "me/app:C")
    assert asked.asked == "paused"
    # Asking it again warns again: what was asked of a name makes it no more a project.
    assert main(["control", "resume", "--project", "me/app:C", "--db", db]) == 0
    assert "warning: me/app:C is no project this database holds yet" in capsys.readouterr().err
    assert main(["control", "resume", "--project", "me/app:PLAN", "--db", db]) == 0
    assert capsys.readouterr().err == ""  # the real one: no word
    assert main(["control", "pause", "--project", "not a project", "--db", db]) == 2
    assert "no project 'not a project' in this database" in capsys.readouterr().err


def test_a_run_started_while_paused_says_so_and_claims_after_resume(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # A pause left by a run that was killed held every later run, which printed nothing.
    home, gates = tmp_path, tmp_path / "gates"
    agent = make_project(home, "### P1: Note 1\nWrite p1.txt.\n")
    monkeypatch.chdir(home)
    (gates / "P1.go").write_text("")
    with ModelServer([ScriptedResponder(review_rules)]) as reviewer:
        env = run_env(reviewer.url)
        cli = in_process(capsys)

        push_to_local_forge(home, cli)
        with open_store(str(home / ".agent-harness" / "harness.sqlite")) as store:
            # As a run killed while paused leaves it.
            set_control(store, "paused", "me/app:PLAN", by="agent-harness control", ahead=True)
        run = start_run(home, env, agent)
        try:
            said, lines = run.stderr, []
            assert said is not None
            reader = threading.Thread(target=lambda: lines.append(said.readline()))
            reader.start()
            reader.join(timeout=30)  # before the fix it said nothing, and waited for ever
            assert lines, "the run said nothing of the pause"
            first = lines[0]
            assert first.startswith("warning: me/app:PLAN is paused (asked by agent-harness ")
            assert "until `agent-harness control resume --project me/app:PLAN`" in first
            assert not (gates / "P1.started").exists()

            def pool() -> Any:
                with open_store(str(home / ".agent-harness" / "harness.sqlite")) as store:
                    [shown] = get_control(store, "me/app:PLAN")
                return shown.pool

            # It reported its pool "stopped" with no workers, so `control drain` of every
            # project answered "no run is working any project now".
            reported = wait_for("a report of the pool", pool, run)
            assert reported.state == "paused"
            assert "asked: resume" in cli("control", "resume")
            out, err = run.communicate(timeout=60)
        finally:
            if run.poll() is None:
                run.kill()
                run.communicate()
    assert run.returncode == 0, err
    assert json.loads(out.strip().splitlines()[-1])["items"][0]["state"] == "pr_open"
