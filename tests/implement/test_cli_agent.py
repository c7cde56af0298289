"""CliImplementer's judgement of a finished agent, with real git and a scripted agent.

An agent that exits 0 but reports an error is taken at its word only if its worktree shows
work; when git cannot read the worktree, that is said, never read as "it changed something".
A provider failure the agent printed (the lines recorded in tests/models/cli_outputs.json)
costs what the failure policy says: a rate limit waits, a bad key ends the item.
"""

from __future__ import annotations

import json
import random
import shlex
import subprocess
from pathlib import Path
from typing import Any

import pytest

from agent_harness.agents.presets import preset_for
from agent_harness.git.worktrees import Worktree
from agent_harness.implement.cli_agent import CliImplementer
from agent_harness.implement.protocol import ImplementResult
from agent_harness.plan.model import WorkItem
from agent_harness.sessions.headless import HeadlessHost
from agent_harness.testing.agents import write_scripted_agent
from tests.shared.sessions import base_env

pytestmark = pytest.mark.integration

# Exit 0 after reporting a failed turn, the way Claude Code's stream-json ends one.
REPORTS_AN_ERROR = {
    "steps": [{"print": json.dumps({"type": "result", "is_error": True, "result": "tool broke"})}],
    "exit": 0,
}
ITEM = WorkItem(id="T1", title="Do a thing", body="", success_check="", line=1, form="heading")


def git(cwd: Path, *args: str) -> str:
    done = subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True, text=True)
    return done.stdout.strip()


@pytest.fixture
def tree(tmp_path: Path) -> Worktree:
    """A real worktree of a real repository, at the commit its work starts from."""
    origin = tmp_path / "origin"
    origin.mkdir()
    git(origin, "init", "-q", "-b", "main")
    git(origin, "config", "user.email", "test@example.invalid")
    git(origin, "config", "user.name", "test")
    (origin / "README.md").write_text("# demo\n")
    git(origin, "add", "-A")
    git(origin, "commit", "-q", "-m", "start")
    path = tmp_path / "wt"
    git(origin, "worktree", "add", "-q", "-b", "item-T1", str(path))
    return Worktree("T1", path, "item-T1", git(origin, "rev-parse", "HEAD"))


NOW = 1_800_000_000.0
RECORDED: list[dict[str, Any]] = json.loads(
    (Path(__file__).parents[1] / "models" / "cli_outputs.json").read_text(encoding="utf-8")
)


def recorded(agent: str, starts: str) -> list[str]:
    """The lines an agent printed, from the recorded outputs."""
    [row] = [r for r in RECORDED if r["agent"] == agent and r["output"].startswith(starts)]
    return list(row["lines"])


def implement(
    tmp_path: Path, tree: Worktree, behaviour: dict[str, Any] = REPORTS_AN_ERROR
) -> ImplementResult:
    argv = write_scripted_agent(tmp_path / "agents", behaviour)
    implementer = CliImplementer(
        HeadlessHost(tmp_path / "sessions"),
        preset_for(shlex.join(argv) + " {prompt}"),
        base_env(),
        timeout_s=60.0,
        poll_s=0.02,
        clock=lambda: NOW,
        rng=random.Random(7),
    )
    return implementer.implement(
        ITEM,
        tree,
        "Do a thing.",
        session="t-cli-implementer",
        state_dir=tmp_path / "state",
        on_state=lambda _state, _detail: None,
    )


def test_an_agent_that_reports_an_error_and_changed_nothing_crashed(
    tmp_path: Path, tree: Worktree
) -> None:
    result = implement(tmp_path, tree)

    assert (result.ok, result.state) == (False, "crashed")
    assert result.reason == "custom exited 0 but reported: tool broke"


def test_a_worktree_git_cannot_read_is_reported_not_taken_for_work(
    tmp_path: Path, tree: Worktree
) -> None:
    # The worktree's link to its repository points nowhere: every git command in it fails.
    (tree.path / ".git").write_text("gitdir: /nonexistent/agent-harness/worktree\n")

    result = implement(tmp_path, tree)

    assert (result.ok, result.state, result.permanent) == (False, "crashed", False)
    assert result.reason.startswith("cannot tell whether custom changed anything: git status")
    assert "not a git repository" in result.reason


def prints(lines: list[str], exit_code: int) -> dict[str, Any]:
    return {"steps": [{"print": lines}], "exit": exit_code}


def test_codex_stopped_by_a_plain_429_waits_a_minute_instead_of_crashing(
    tmp_path: Path, tree: Worktree
) -> None:
    result = implement(tmp_path, tree, prints(recorded("codex", '`turn.failed`: "exceeded'), 1))

    assert (result.ok, result.state, result.permanent) == (False, "rate_limited", False)
    assert result.failure is not None and result.failure.kind.value == "burst"
    assert result.wait_until is not None and NOW + 60 <= result.wait_until <= NOW + 66
    assert "429 Too Many Requests" in result.reason


# Two hours asked for is a spent window of the account, and is waited out to the second.
@pytest.mark.parametrize(("retry_after", "low", "high"), [(120, 120, 132), (7200, 7200, 7200)])
def test_a_429_with_retry_after_waits_that_long(
    tmp_path: Path, tree: Worktree, retry_after: int, low: float, high: float
) -> None:
    line = recorded("opencode", "`error` event, `APIError` 429")[0]
    line = line.replace('"retry-after":"120"', f'"retry-after":"{retry_after}"')

    result = implement(tmp_path, tree, prints([line], 1))

    assert result.state == "rate_limited" and result.wait_until is not None
    assert NOW + low <= result.wait_until <= NOW + high


def test_a_bad_key_ends_the_item_at_once(tmp_path: Path, tree: Worktree) -> None:
    result = implement(
        tmp_path, tree, prints(recorded("codex", '`turn.failed`: "unexpected status 401'), 1)
    )

    assert (result.ok, result.state, result.permanent) == (False, "refused", True)
    assert result.failure is not None and result.failure.kind.value == "auth"
    assert "Incorrect API key provided" in result.reason


def test_an_agent_that_exits_0_after_a_bad_key_and_changed_nothing_is_refused(
    tmp_path: Path, tree: Worktree
) -> None:
    lines = recorded("aider", '"litellm.AuthenticationError')

    result = implement(tmp_path, tree, prints(lines, 0))

    assert (result.ok, result.state, result.permanent) == (False, "refused", True)
    assert result.reason.startswith("custom exited 0 but reported: auth from custom")


def test_an_agent_of_ones_own_that_did_work_and_exited_0_is_judged_by_it_not_by_a_limit_line(
    tmp_path: Path, tree: Worktree
) -> None:
    # A custom agent printed a Claude usage-limit line after its work and exited 0: the work
    # was dropped, and the whole account parked every other item for five hours.
    worked = {
        "steps": [
            {"write_file": {"path": "f1.txt"}},
            {"claude_rate_limit": {"reset_in_s": 5 * 3600}},
        ],
        "exit": 0,
    }
    result = implement(tmp_path, tree, worked)
    assert (result.ok, result.state, result.wait_until) == (True, "done", None)
    assert "not taken as how it ended" in result.reason
    # With nothing done, the same line still waits out the limit, no attempt spent.
    (tree.path / "f1.txt").unlink()
    idle = {"steps": [{"claude_rate_limit": {"reset_in_s": 5 * 3600}}], "exit": 0}
    waiting = implement(tmp_path, tree, idle)
    assert not waiting.ok and waiting.wait_until is not None
