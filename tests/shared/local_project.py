"""A user's own project on the local forge, as the CLI tests drive it: the example `tally` with
its history on main, a plan, and a scripted agent that waits for the test's word."""

from __future__ import annotations

import shlex
import shutil
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
# Says when it started an item (a file in the gates folder), then waits for `<item>.go`.
GATED_AGENT = """\
import pathlib, re, sys, time
gates = pathlib.Path(sys.argv[1])
prompt = pathlib.Path(sys.argv[sys.argv.index("--prompt-file") + 1]).read_text()
item = re.search(r"# Work item (\\S+):", prompt).group(1)
(gates / f"{item}.started").write_text("")
give_up = time.monotonic() + 300  # a fail-safe: a test that died leaves no agent for ever
while not (gates / f"{item}.go").exists():
    if time.monotonic() > give_up:
        sys.exit(3)
    time.sleep(0.05)
pathlib.Path(f"{item.lower()}.txt").write_text(item + "\\n")
"""


def git(cwd: Path, *args: str) -> str:
    proc = subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True, check=False)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


def make_project(home: Path, plan: str) -> str:
    """`home/app` with one commit, `home/PLAN.md`, and the gated agent; returns its command."""
    app = home / "app"
    shutil.copytree(ROOT / "examples" / "project", app)
    git(home, "init", "-q", "--initial-branch=main", str(app))
    git(app, "config", "user.name", "Dee")
    git(app, "config", "user.email", "dee@example.com")
    git(app, "add", "--all")
    git(app, "commit", "-q", "-m", "start")
    (home / "PLAN.md").write_text(plan)
    (home / "agent.py").write_text(GATED_AGENT)
    (home / "gates").mkdir()
    agent = shlex.join([sys.executable, str(home / "agent.py"), str(home / "gates")])
    return agent + " --prompt-file {prompt_file}"


def push_to_local_forge(home: Path, cli: Callable[..., str]) -> None:
    """What `plan --forge local` tells a person to do: add the origin it names, push main."""
    said = cli("plan", "PLAN.md", "--repo", "me/app", "--forge", "local", stderr=True)
    add = next(line.strip() for line in said.splitlines() if "git remote add origin" in line)
    git(home / "app", *shlex.split(add)[1:])
    git(home / "app", "push", "-q", "origin", "main")


def wait_for(what: str, fact: Callable[[], Any], run: subprocess.Popen[str]) -> Any:
    """Poll for a fact the running process brings about; fail if it ends or never does."""
    deadline = time.monotonic() + 60
    while not (found := fact()):
        assert run.poll() is None, f"the run ended before {what}: {run.communicate()}"
        assert time.monotonic() < deadline, f"never: {what}"
        time.sleep(0.05)
    return found
