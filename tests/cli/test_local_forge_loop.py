"""The whole loop on a user's own project with `--forge local`, as the CLI is typed: plan, push
the project's history to the origin it names, run, open the pull request's link once the run
has ended (while `forge serve --data` shows the pages), merge it by hand, reconcile."""

from __future__ import annotations

import json
import os
import shlex
import shutil
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from agent_harness.demo.rules import review_rules
from agent_harness.testing.model_server import ModelServer, ScriptedResponder
from tests.shared.sessions import AS_A_SCRIPTS_BACKGROUND_JOB

pytestmark = pytest.mark.acceptance

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples"
PLAN = """\
### T1: Count words
Add `word_count(text: str) -> int` to `tally/words.py`. Words are runs of
non-whitespace characters; an empty string has 0 words.

check: `python -m unittest tests.test_words`
"""


def git(cwd: Path, *args: str) -> str:
    proc = subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True, check=False)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


def _hearing_ctrl_c() -> None:
    """In a child about to exec: SIGINT as a terminal's foreground job has it."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def group_members(pgid: int) -> list[str]:
    """The processes of group `pgid` that have not ended (a zombie has)."""
    found = []
    for entry in Path("/proc").iterdir():
        try:
            fields = (entry / "stat").read_text().rpartition(")")[2].split()
        except (OSError, NotADirectoryError):
            continue
        if len(fields) > 2 and fields[2] == str(pgid) and fields[0] not in ("Z", "X"):
            found.append(entry.name)
    return found


def browse(url: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(url, timeout=10) as response:
            return response.status, response.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()


def run_env(reviewer_url: str) -> dict[str, str]:
    """The CLI's environment: ours without our settings, the scripted reviewer, headless."""
    return {
        **{k: v for k, v in os.environ.items() if not k.startswith("AGENT_HARNESS_")},
        "PATH": os.pathsep.join([str(Path(sys.executable).parent), os.environ["PATH"]]),
        "OPENAI_BASE_URL": f"{reviewer_url}/v1",
        "OPENAI_API_KEY": "sk-local",
        "AGENT_HARNESS_SESSIONS__HOST": "headless",
    }


@pytest.fixture
def home(tmp_path: Path) -> Path:
    """The user's own project (the example `tally`) with its history on main, and a plan."""
    app = tmp_path / "app"
    shutil.copytree(EXAMPLES / "project", app)
    git(tmp_path, "init", "-q", "--initial-branch=main", str(app))
    git(app, "config", "user.name", "Dee")
    git(app, "config", "user.email", "dee@example.com")
    git(app, "add", "--all")
    git(app, "commit", "-q", "-m", "tally: my project as it is")
    (tmp_path / "PLAN.md").write_text(PLAN)
    return tmp_path


def test_a_users_own_project_through_the_whole_loop(home: Path) -> None:
    with ModelServer([ScriptedResponder(review_rules)]) as reviewer:
        env = run_env(reviewer.url) | {"COLUMNS": "250"}  # links not wrapped by the tables

        def cli(*args: str, code: int = 0) -> str:
            proc = subprocess.run(
                [sys.executable, "-m", "agent_harness", *args],
                cwd=home, env=env, capture_output=True, text=True, timeout=180,
            )  # fmt: skip
            assert proc.returncode == code, proc.stdout + proc.stderr
            return proc.stdout + proc.stderr

        said = cli("plan", "PLAN.md", "--repo", "me/app", "--forge", "local")
        add = next(line.strip() for line in said.splitlines() if "git remote add origin" in line)
        git(home / "app", *shlex.split(add)[1:])
        git(home / "app", "push", "-q", "origin", "main")

        agent = shlex.join([sys.executable, str(EXAMPLES / "agent" / "tally_agent.py")])
        said = cli(
            "run", "--repo", "me/app", "--forge", "local", "--work", "app", "--plan", "PLAN.md",
            "--agent", agent + " --prompt-file {prompt_file}", "--reviewer", "openai:gpt-test",
            "--check", "python -m unittest",
        )  # fmt: skip
    address = (home / ".agent-harness" / "forge" / "address").read_text().strip()
    link = f"{address}/_html/me/app/pull/2"
    assert link in said
    assert "agent-harness forge serve --data .agent-harness/forge" in said
    assert "agent-harness forge merge me/app 2" in said
    # The reconcile it suggests after a merge cleans the merged item's worktree up: --work.
    assert "agent-harness reconcile --repo me/app --forge local --work app" in said
    with pytest.raises(urllib.error.URLError):
        browse(link)  # the run that served it has ended

    serving = subprocess.Popen(
        [sys.executable, "-m", "agent_harness", "forge", "serve", "--data", ".agent-harness/forge"],
        cwd=home, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        assert serving.stdout is not None
        assert serving.stdout.readline().startswith(f"forge serving {address} ")
        status, page = browse(link)
        assert status == 200
        assert "Count words" in page and "tally/words.py" in page
        assert "agent-harness forge merge me/app 2" in page
        merged = cli("forge", "merge", "me/app", "2")
        assert merged.startswith('merged me/app#2 "T1: Count words" (agent-harness/T1-')
        assert "Merged" in browse(link)[1]
    finally:
        serving.send_signal(signal.SIGINT)
        serving.communicate(timeout=10)

    git(home / "app", "pull", "-q", "origin", "main")
    assert (home / "app" / "tally" / "words.py").is_file()
    out = cli("reconcile", "--repo", "me/app", "--forge", "local", "--work", "app", "--json")
    transitions = json.loads(out)["transitions"]
    assert [(t["item"], t["state"], t["pr"]) for t in transitions] == [("T1", "merged", 2)]


@pytest.mark.parametrize(
    ("stop", "deaf_to_ctrl_c"),
    [(signal.SIGINT, False), (signal.SIGINT, True), (signal.SIGTERM, False)],
    ids=["ctrl-c", "kill-INT-of-a-scripts-background-job", "kill"],
)
def test_ctrl_c_or_kill_while_a_check_runs_ends_the_check_and_spends_no_attempt(
    home: Path, stop: signal.Signals, deaf_to_ctrl_c: bool
) -> None:
    started = home / "check.pid"
    # The check notes its process and would write into the worktree long after.
    check = f"echo $$ > {started}; sleep 30; echo late > late.txt"
    with ModelServer([ScriptedResponder(review_rules)]) as reviewer:
        env = run_env(reviewer.url)

        def cli(*args: str) -> subprocess.Popen[str]:
            # As a script's background job, or as from a terminal, whoever started pytest.
            deaf = AS_A_SCRIPTS_BACKGROUND_JOB if deaf_to_ctrl_c else []
            return subprocess.Popen(
                [*deaf, sys.executable, "-m", "agent_harness", *args], cwd=home, env=env,
                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                preexec_fn=None if deaf_to_ctrl_c else _hearing_ctrl_c,
            )  # fmt: skip

        said = "".join(cli("plan", "PLAN.md", "--repo", "me/app", "--forge", "local").communicate())
        add = next(line.strip() for line in said.splitlines() if "git remote add origin" in line)
        git(home / "app", *shlex.split(add)[1:])
        git(home / "app", "push", "-q", "origin", "main")
        agent = shlex.join([sys.executable, str(EXAMPLES / "agent" / "tally_agent.py")])
        run = cli(
            "run", "--repo", "me/app", "--forge", "local", "--work", "app", "--plan", "PLAN.md",
            "--agent", agent + " --prompt-file {prompt_file}", "--reviewer", "openai:gpt-test",
            "--check", check,
        )  # fmt: skip
        try:
            while not started.exists() or not started.read_text().strip():
                assert run.poll() is None, run.communicate()
                time.sleep(0.05)
            stat = Path(f"/proc/{int(started.read_text())}/stat").read_text()
            pgid = int(stat.rpartition(")")[2].split()[2])  # the check's process group
            run.send_signal(stop)  # a SIGTERM killed it on the spot, saying nothing
            _, err = run.communicate(timeout=60)
        finally:
            run.kill()
    assert run.returncode == 130, err
    assert "(1 check stopped, to run again)" in err
    # Its check (the shell and its sleep) ended with the run: once their new parent has reaped
    # them, no process of the group is left.
    for _ in range(500):
        if not group_members(pgid):
            break
        time.sleep(0.02)
    assert group_members(pgid) == []
    [item] = json.loads(cli("work", "--json").communicate()[0])["items"]
    assert (item["id"], item["state"], item["attempts"]) == ("T1", "checks", 1)
    # Held under its lease for the next run, not failed, and noted so that taking it back is
    # not counted as a worker's death (enough stops used to fail it as a crash loop).
    assert item["reason"] == "its run was stopped; the next run takes it back"
    # Its pool last said it stopped: `control` said "draining" long after the run was gone.
    [said] = json.loads(cli("control", "--json").communicate()[0])
    assert (said["pool"]["state"], said["pool"]["workers"]) == ("stopped", 0)
