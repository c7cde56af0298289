"""The user's own clone as it is set up: what it refuses is said once, in git's words, before
paid work is repeated, and nothing of the user's own is taken over or pushed."""

from __future__ import annotations

import os
import shlex
import subprocess
from pathlib import Path

import pytest

from agent_harness.errors import HarnessError
from agent_harness.pipeline.settings import RunSettings

from .conftest import Harness

ONE_ITEM = "### T1: Add a note\nWrite notes/T1.txt.\n"
AGENT = (
    "sh -c " + shlex.quote('mkdir -p notes && echo done > notes/T1.txt\n: "$0"') + " {prompt_file}"
)

pytestmark = pytest.mark.integration


@pytest.fixture
def h(harness: Harness) -> Harness:
    return harness


def git(cwd: Path, *args: str) -> str:
    done = subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True, check=True)
    return done.stdout.strip()


def settings() -> RunSettings:
    return RunSettings(checks=[], lease_s=30.0, idle_poll_s=0.02, max_attempts=3)


def agent_runs(h: Harness, project: str) -> int:
    events = h.store.all_events(project=project, item="T1")
    return sum(1 for event in events if event.kind == "agent_started")


def test_a_commit_the_clone_will_not_make_fails_the_item_once_in_gits_words(h: Harness) -> None:
    # `commit.gpgsign` with no usable key: the agent ran three times (paid runs with a real
    # agent), and the reason shown was "failed to write commit object", gpg's words dropped.
    git(h.work, "config", "commit.gpgsign", "true")
    git(h.work, "config", "gpg.program", "false")
    pipeline = h.pipeline(ONE_ITEM, agent=AGENT, settings=settings())
    pipeline.run()
    [item] = pipeline.report(None).items
    assert item.state == "failed"
    assert agent_runs(h, pipeline.project) == 1
    failed = [e.payload.as_dict() for e in h.store.all_events(project=pipeline.project, item="T1")
              if e.kind == "attempt_failed"]  # fmt: skip
    assert failed[-1]["failure"] == "repository"
    assert "gpg failed to sign the data" in failed[-1]["reason"]


def test_a_private_branch_in_the_items_name_is_neither_built_on_nor_pushed(h: Harness) -> None:
    # The user's own unpushed branch `agent-harness/T1-wip` was adopted on the item's first
    # claim: the agent's commit went on top of "WIP private, do not push", and both were pushed.
    git(h.work, "checkout", "-q", "-b", "agent-harness/T1-wip")
    (h.work / "draft.txt").write_text("private draft\n")
    git(h.work, "add", "draft.txt")
    git(h.work, "-c", "user.name=u", "-c", "user.email=u@x", "commit", "-qm", "WIP private")
    private = git(h.work, "rev-parse", "HEAD")
    git(h.work, "checkout", "-q", "main")
    pipeline = h.pipeline(ONE_ITEM, agent=AGENT, settings=settings())
    pipeline.run()
    [item] = pipeline.report(None).items
    assert item.state == "failed" and agent_runs(h, pipeline.project) == 0
    assert "agent-harness/T1-wip" in item.reason and "1 commit" in item.reason
    assert git(h.work, "rev-parse", "agent-harness/T1-wip") == private  # left as it was
    assert "agent-harness/T1-wip" not in git(h.work, "ls-remote", "--heads", "origin")


def test_a_branch_named_like_the_harnesss_folder_is_said_once_before_any_agent(
    h: Harness,
) -> None:
    # A branch `agent-harness` blocks every `agent-harness/...` ref: each attempt failed with
    # "cannot lock ref", three times, after the agent had run.
    git(h.work, "branch", "agent-harness")
    pipeline = h.pipeline(ONE_ITEM, agent=AGENT, settings=settings())
    pipeline.run()
    [item] = pipeline.report(None).items
    assert item.state == "failed" and agent_runs(h, pipeline.project) == 0
    assert "branch 'agent-harness'" in item.reason


def test_a_commit_of_ones_own_on_main_before_the_run_is_no_agents_commit(h: Harness) -> None:
    # The guard compared local main with origin/main: one unpushed commit of the user's own
    # ran the agent three times, and the item failed "an agent committed to the default
    # branch". Items branch from origin/main, so that commit is simply not theirs.
    (h.work / "mine.txt").write_text("my unpushed work\n")
    git(h.work, "add", "mine.txt")
    git(h.work, "-c", "user.name=u", "-c", "user.email=u@x", "commit", "-qm", "my own")
    pipeline = h.pipeline(ONE_ITEM, agent=AGENT, settings=settings())
    pipeline.run()
    [item] = pipeline.report(None).items
    assert item.state == "pr_open" and agent_runs(h, pipeline.project) == 1


def test_an_agent_that_commits_to_main_is_still_refused(h: Harness) -> None:
    to_main = (
        "sh -c "
        + shlex.quote(
            "echo x > x.txt && git add x.txt && git -c user.name=a -c user.email=a@x commit -qm x"
            ' && git update-ref refs/heads/main HEAD\n: "$0"'
        )
        + " {prompt_file}"
    )
    pipeline = h.pipeline(ONE_ITEM, agent=to_main, settings=settings())
    pipeline.run()
    [item] = pipeline.report(None).items
    assert item.state == "failed" and "committed to the default branch" in (item.reason or "")


def test_a_clone_whose_origin_is_another_repository_is_refused_before_any_agent(
    h: Harness, tmp_path: Path
) -> None:
    # `origin` pointing at the user's other copy (their real GitHub, a fork): the agent ran,
    # its branch was pushed there, and the pull request failed "head invalid".
    elsewhere = tmp_path / "elsewhere" / "github.git"
    git(tmp_path, "init", "-q", "--bare", str(elsewhere))
    git(h.work, "push", "-q", str(elsewhere), "main")
    git(h.work, "remote", "set-url", "origin", str(elsewhere))
    pipeline = h.pipeline(ONE_ITEM, agent=AGENT, settings=settings())
    with pytest.raises(
        HarnessError, match=r"origin .*github\.git.* is not (the local forge's )?octo/tally"
    ):
        pipeline.run()
    assert agent_runs(h, pipeline.project) == 0
    assert "agent-harness/" not in git(elsewhere, "branch", "--list")


def test_an_origin_of_the_same_name_elsewhere_than_the_forge_is_refused_before_any_agent(
    h: Harness, tmp_path: Path
) -> None:
    # `--forge local` with the clone's origin still on GitHub (here a path standing in for
    # it): the names matched, so every branch was pushed there and no pull request opened.
    elsewhere = tmp_path / "github" / "octo" / "tally.git"
    git(tmp_path, "init", "-q", "--bare", str(elsewhere))
    git(h.work, "push", "-q", str(elsewhere), "main")
    forge_url = git(h.work, "remote", "get-url", "origin")
    git(h.work, "remote", "set-url", "origin", elsewhere.as_uri())
    pipeline = h.pipeline(ONE_ITEM, agent=AGENT, settings=settings())
    with pytest.raises(HarnessError, match=r"not the local forge's octo/tally") as refused:
        pipeline.run()
    assert f"git remote set-url origin {forge_url}" in refused.value.message
    assert agent_runs(h, pipeline.project) == 0
    assert "agent-harness/" not in git(elsewhere, "branch", "--list")
    # The forge's own repository, by its path rather than its file:// URL, is taken.
    git(h.work, "remote", "set-url", "origin", forge_url.removeprefix("file://"))
    h.pipeline(ONE_ITEM, agent=AGENT, settings=settings()).run()
    assert len(h.pulls()) == 1


def test_a_relative_origin_is_said_before_any_agent_not_after_the_review(h: Harness) -> None:
    # `../forge/…/app.git` is relative to the clone; the push runs in the item's worktree (so a
    # pre-push hook checks the branch pushed), where it named nothing, and it failed after the
    # agent, the checks and the review, three times.
    url = git(h.work, "remote", "get-url", "origin")
    target = Path(url.removeprefix("file://"))
    git(h.work, "remote", "set-url", "origin", os.path.relpath(target, h.work))
    pipeline = h.pipeline(ONE_ITEM, agent=AGENT, settings=settings())
    with pytest.raises(HarnessError, match=r"a path relative to the clone.*git remote set-url"):
        pipeline.run()
    assert agent_runs(h, pipeline.project) == 0


def test_a_pre_push_hook_checks_the_branch_pushed(h: Harness) -> None:
    # The hook runs in the item's worktree, on its branch: it sees the agent's file.
    hook = h.work / ".git" / "hooks" / "pre-push"
    hook.write_text(
        "#!/bin/sh\ntest -f notes/T1.txt || { echo 'pre-push: notes missing' >&2; exit 1; }\n"
    )
    hook.chmod(0o755)
    pipeline = h.pipeline(ONE_ITEM, agent=AGENT, settings=settings())
    pipeline.run()
    [item] = pipeline.report(None).items
    assert item.state == "pr_open", item.reason
