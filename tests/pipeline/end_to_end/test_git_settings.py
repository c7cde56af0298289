"""An agent cannot make the harness's own git run its programs or push elsewhere.

The agent shares the user's clone: its worktree's git directory is the clone's, so an agent can
write the clone's git settings and hooks. The harness runs git there after the agent (commit,
push, the next item's worktree), with its own environment and the user's push credentials.
Hooks run from the clone's own hooks folder, named on the command line, and `fsmonitor` is
off, so a hooks path an agent sets changes nothing. A hook it adds or changes there, a push
URL, or a rewritten link to the clone is found before the harness's next git command; the run
stops saying which, and the item waits (its attempt given back) for a person. A harmless
setting an agent may well write (its commit identity) changes nothing.
"""

from __future__ import annotations

import json
import shlex
import subprocess
from pathlib import Path

import pytest

from agent_harness.cli import main
from agent_harness.git.settings import GitSettingsChanged
from agent_harness.pipeline.settings import RunSettings

from .conftest import REPO, Harness, use_the_cli

ONE_ITEM = "### T1: Count words\nMake it.\n"


def shell_agent(script: str) -> str:
    """An agent program: a shell script run in the worktree (its prompt file as `$0`)."""
    return "sh -c " + shlex.quote(f'{script}\n: "$0"') + " {prompt_file}"


def marking_hooks(where: Path, marks: Path) -> Path:
    """A hooks folder whose every hook leaves a file in `marks` when it runs."""
    where.mkdir(parents=True)
    marks.mkdir(parents=True, exist_ok=True)
    for name in ("pre-push", "post-commit", "post-checkout", "reference-transaction"):
        hook = where / name
        hook.write_text(f"#!/bin/sh\ntouch {shlex.quote(str(marks / name))}\n")
        hook.chmod(0o755)
    return where


def settings() -> RunSettings:
    return RunSettings(checks=[], lease_s=30.0, idle_poll_s=0.02, max_attempts=2)


def run_stopped(h: Harness, script: str) -> tuple[GitSettingsChanged, str]:
    """Run one item with an agent that runs `script`; the run must stop. Its error and the
    item's state after it."""
    pipeline = h.pipeline(ONE_ITEM, agent=shell_agent(script), settings=settings())
    with pytest.raises(GitSettingsChanged) as stopped:
        pipeline.run()
    [item] = pipeline.report(None).items
    return stopped.value, item.state


def delivered(h: Harness, script: str) -> None:
    pipeline = h.pipeline(ONE_ITEM, agent=shell_agent(script), settings=settings())
    [item] = pipeline.run().items
    assert item.state == "pr_open", item.reason
    assert len(h.pulls()) == 1


@pytest.mark.acceptance
def test_a_hooks_path_the_agent_sets_never_runs_and_the_work_is_delivered(
    harness: Harness, tmp_path: Path
) -> None:
    # What husky's `npm install` does, or an agent on purpose: harmless to a harness whose git
    # names the clone's hooks folder itself.
    marks = tmp_path / "marks"
    hooks = marking_hooks(tmp_path / "planted", marks)
    delivered(
        harness, f"git config core.hooksPath {shlex.quote(str(hooks))}\necho notes > NOTES.md"
    )
    assert list(marks.iterdir()) == []


@pytest.mark.acceptance
def test_a_hook_the_agent_writes_into_the_clone_never_runs_and_stops_the_run(
    harness: Harness, tmp_path: Path
) -> None:
    marks = tmp_path / "marks"
    marks.mkdir()
    script = ['hooks="$(git rev-parse --git-common-dir)/hooks"']
    for name in ("pre-push", "post-commit", "reference-transaction", "prepare-commit-msg"):
        hook = f"#!/bin/sh\ntouch {shlex.quote(str(marks / name))}\n"
        script += [f'printf %s {shlex.quote(hook)} > "$hooks/{name}"', f'chmod +x "$hooks/{name}"']
    error, state = run_stopped(harness, "\n".join([*script, "echo notes > NOTES.md"]))
    assert ".git/hooks/post-commit (added)" in error.message
    assert ".git/hooks/pre-push (added)" in error.message
    assert list(marks.iterdir()) == [] and harness.pulls() == []
    assert state == "waiting"


@pytest.mark.acceptance
def test_a_pre_commit_hook_the_agent_installs_changes_nothing(
    harness: Harness, tmp_path: Path
) -> None:
    # What `pre-commit install` writes: a hook the harness's commits (`--no-verify`) never run.
    mark = tmp_path / "pre-commit-ran"
    hook = f"#!/bin/sh\ntouch {shlex.quote(str(mark))}\n"
    script = (
        'hooks="$(git rev-parse --git-common-dir)/hooks"\n'
        f'printf %s {shlex.quote(hook)} > "$hooks/pre-commit"; chmod +x "$hooks/pre-commit"\n'
        "echo notes > NOTES.md"
    )
    delivered(harness, script)
    assert not mark.exists()


@pytest.mark.acceptance
def test_the_users_own_hooks_still_run(harness: Harness, tmp_path: Path) -> None:
    # Git LFS uploads its objects from a pre-push hook: a hook of the clone's from before the
    # run is the user's, and runs.
    mark = tmp_path / "pre-push-ran"
    hook = harness.work / ".git" / "hooks" / "pre-push"
    hook.write_text(f"#!/bin/sh\ntouch {shlex.quote(str(mark))}\n")
    hook.chmod(0o755)
    delivered(harness, "echo notes > NOTES.md")
    assert mark.exists()


@pytest.mark.acceptance
def test_a_worktree_the_agent_links_to_another_git_directory_stops_the_run(
    harness: Harness, tmp_path: Path
) -> None:
    # Its worktree's `.git` file is the agent's to rewrite: pointed at a copy of the clone's git
    # directory with settings of its own, the harness's commit and push would obey those.
    marks = tmp_path / "marks"
    hooks = marking_hooks(tmp_path / "planted", marks)
    elsewhere = tmp_path / "elsewhere.git"
    subprocess.run(["git", "init", "-q", "--bare", str(elsewhere)], check=True)
    copy = shlex.quote(str(tmp_path / "gitdir-copy"))
    script = "\n".join(
        [
            'own="$(git rev-parse --git-dir)"; common="$(git rev-parse --git-common-dir)"',
            f'cp -r "$own" {copy}; rm {copy}/commondir',
            f'cp -r "$common/objects" "$common/refs" "$common/config" {copy}/',
            f"git --git-dir={copy} config core.hooksPath {shlex.quote(str(hooks))}",
            f"git --git-dir={copy} config remote.origin.pushurl {shlex.quote(str(elsewhere))}",
            f"echo gitdir: {copy} > .git",
            "echo notes > NOTES.md",
        ]
    )
    error, state = run_stopped(harness, script)
    assert ".git: leads outside the clone's git directory" in error.message
    assert list(marks.iterdir()) == [] and harness.pulls() == []
    assert state == "waiting"
    listed = subprocess.run(
        ["git", "for-each-ref"], cwd=elsewhere, capture_output=True, text=True, check=True
    )
    assert listed.stdout == ""


@pytest.mark.acceptance
def test_a_push_url_the_agent_sets_is_never_pushed_to(harness: Harness, tmp_path: Path) -> None:
    elsewhere = tmp_path / "elsewhere.git"
    subprocess.run(["git", "init", "-q", "--bare", str(elsewhere)], check=True)
    error, _ = run_stopped(
        harness,
        f"git remote set-url --push origin {shlex.quote(str(elsewhere))}\necho notes > NOTES.md",
    )
    assert "remote.origin.pushurl" in error.message
    listed = subprocess.run(
        ["git", "for-each-ref"], cwd=elsewhere, capture_output=True, text=True, check=True
    )
    assert listed.stdout == ""
    assert harness.pulls() == []


@pytest.mark.acceptance
def test_an_fsmonitor_program_the_agent_sets_never_runs(harness: Harness, tmp_path: Path) -> None:
    mark = tmp_path / "fsmonitor-ran"
    program = tmp_path / "fsmonitor"
    program.write_text(f"#!/bin/sh\ntouch {shlex.quote(str(mark))}\nexit 1\n")
    program.chmod(0o755)
    error, _ = run_stopped(
        harness, f"git config core.fsmonitor {shlex.quote(str(program))}\necho notes > NOTES.md"
    )
    assert "core.fsmonitor" in error.message
    assert not mark.exists()


@pytest.mark.acceptance
def test_an_agent_setting_its_commit_identity_is_delivered_as_usual(harness: Harness) -> None:
    script = (
        "git config user.name 'Some Agent'\n"
        "git config user.email agent@example.com\n"
        "echo notes > NOTES.md"
    )
    delivered(harness, script)


@pytest.mark.acceptance
def test_the_cli_stops_in_one_line_with_exit_4_and_the_item_waits(
    harness: Harness,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    use_the_cli(harness, tmp_path, monkeypatch)
    (tmp_path / "PLAN.md").write_text(ONE_ITEM)
    elsewhere = tmp_path / "elsewhere.git"
    subprocess.run(["git", "init", "-q", "--bare", str(elsewhere)], check=True)
    agent = shell_agent(f"git remote set-url --push origin {elsewhere}\necho n > N.md")
    args = ["--repo", REPO, "--plan", "PLAN.md", "--work", str(harness.work), "--agent", agent]
    code = main(["run", *args, "--reviewer", "openai:gpt-x"])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 4
    assert not any("Traceback" in line for line in err), err  # the live view, then one error
    assert err[-1].startswith("error: git settings of the clone at ")
    assert ".git/config: remote.origin.pushurl" in err[-1]
    assert main(["work", "show", "T1", "--json"]) == 0
    item = json.loads(capsys.readouterr().out)["item"]
    assert (item["state"], item["attempts"]) == ("waiting", 0)  # its attempt given back
    assert item["reason"].startswith("the run stops: git settings of the clone at ")
