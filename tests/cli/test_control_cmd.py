"""`agent-harness control` steers a real `agent-harness run` in another process through the
store: pause stops claiming, resume claims again, drain finishes what is in flight and ends the
run; `control` alone shows what was asked and what the workers do."""

from __future__ import annotations

import json
import os
import shlex
import shutil
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from agent_harness.demo.rules import review_rules
from agent_harness.queue.control import get_control
from agent_harness.store.database import open_store
from agent_harness.testing.model_server import ModelServer, ScriptedResponder

pytestmark = pytest.mark.acceptance

ROOT = Path(__file__).resolve().parents[2]
PLAN = "".join(f"### P{n}: Note {n}\nWrite p{n}.txt.\n\n" for n in (1, 2, 3))
# An agent that says when it started an item, then waits for the test's word to finish it.
AGENT = """\
import pathlib, re, sys, time
gates = pathlib.Path(sys.argv[1])
prompt = pathlib.Path(sys.argv[sys.argv.index("--prompt-file") + 1]).read_text()
item = re.search(r"# Work item (\\S+):", prompt).group(1)
(gates / f"{item}.started").write_text("")
while not (gates / f"{item}.go").exists():
    time.sleep(0.05)
pathlib.Path(f"{item.lower()}.txt").write_text(item + "\\n")
"""


def git(cwd: Path, *args: str) -> str:
    proc = subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True, check=False)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


def wait_for(what: str, fact: Callable[[], Any], run: subprocess.Popen[str]) -> Any:
    deadline = time.monotonic() + 60
    while not (found := fact()):
        assert run.poll() is None, f"the run ended before {what}: {run.communicate()}"
        assert time.monotonic() < deadline, f"never: {what}"
        time.sleep(0.05)
    return found


@pytest.fixture
def home(tmp_path: Path) -> Path:
    app = tmp_path / "app"
    shutil.copytree(ROOT / "examples" / "project", app)
    git(tmp_path, "init", "-q", "--initial-branch=main", str(app))
    git(app, "config", "user.name", "Dee")
    git(app, "config", "user.email", "dee@example.com")
    git(app, "add", "--all")
    git(app, "commit", "-q", "-m", "start")
    (tmp_path / "PLAN.md").write_text(PLAN)
    (tmp_path / "agent.py").write_text(AGENT)
    (tmp_path / "gates").mkdir()
    return tmp_path


def test_pause_resume_and_drain_steer_a_running_run(home: Path) -> None:
    gates = home / "gates"
    with ModelServer([ScriptedResponder(review_rules)]) as reviewer:
        env = {
            **{k: v for k, v in os.environ.items() if not k.startswith("AGENT_HARNESS_")},
            "OPENAI_BASE_URL": f"{reviewer.url}/v1",
            "OPENAI_API_KEY": "sk-local",
            "AGENT_HARNESS_SESSIONS__HOST": "headless",
            "AGENT_HARNESS_TRACKER__WRITE_SPACING_S": "0",
        }

        def cli(*args: str, stderr: bool = False) -> str:
            proc = subprocess.run(
                [sys.executable, "-m", "agent_harness", *args],
                cwd=home, env=env, capture_output=True, text=True, timeout=60,
            )  # fmt: skip
            assert proc.returncode == 0, proc.stdout + proc.stderr
            return proc.stdout + (proc.stderr if stderr else "")

        def pool() -> dict[str, Any]:
            # What `control --json` prints, read in this process: the test polls it often.
            with open_store(str(home / ".agent-harness" / "harness.sqlite")) as store:
                [shown] = get_control(store)
            return {"asked": shown.asked, **(shown.pool.model_dump() if shown.pool else {})}

        said = cli("plan", "PLAN.md", "--repo", "me/app", "--forge", "local", stderr=True)
        add = next(line.strip() for line in said.splitlines() if "git remote add origin" in line)
        git(home / "app", *shlex.split(add)[1:])
        git(home / "app", "push", "-q", "origin", "main")
        agent = shlex.join([sys.executable, str(home / "agent.py"), str(gates)])
        agent += " --prompt-file {prompt_file}"
        run = subprocess.Popen(
            [sys.executable, "-m", "agent_harness", "run", "--repo", "me/app", "--forge", "local",
             "--work", "app", "--plan", "PLAN.md", "--agent", agent,
             "--reviewer", "openai:gpt-test", "--json"],
            cwd=home, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        )  # fmt: skip
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
            wait_for("three more reports", lambda: pool()["reports"] >= done["reports"] + 3, run)
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
