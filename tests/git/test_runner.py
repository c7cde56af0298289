"""The one git runner: checked results in git's own words, timeouts, never a prompt."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from agent_harness.git.runner import GitError, failure, git, run_git

pytestmark = pytest.mark.integration


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    path = tmp_path / "repo"
    path.mkdir()
    git(path, "init", "-q", "-b", "main")
    git(
        path,
        "-c",
        "user.name=t",
        "-c",
        "user.email=t@t",
        "commit",
        "-q",
        "--allow-empty",
        "-m",
        "x",
    )
    return path


def test_output_comes_back_without_the_trailing_newline(repo: Path) -> None:
    assert git(repo, "rev-parse", "--abbrev-ref", "HEAD") == "main"


def test_a_failure_says_which_command_where_and_git_s_own_reason(repo: Path) -> None:
    with pytest.raises(GitError) as failed:
        git(repo, "-c", "core.quotePath=false", "rev-parse", "no-such-ref^{commit}")
    message = failed.value.message
    assert message.startswith(f"git rev-parse no-such-ref^{{commit}} failed in {repo}: ")
    assert failed.value.returncode == 128


def test_without_check_the_caller_reads_the_exit_status(repo: Path) -> None:
    result = run_git(repo, "diff", "--quiet", "HEAD", check=False)
    assert result.ok and result.returncode == 0
    (repo / "x.txt").write_text("x")
    git(repo, "add", "x.txt")
    assert run_git(repo, "diff", "--cached", "--quiet", check=False).returncode == 1


def test_input_is_fed_on_stdin(repo: Path) -> None:
    sha = git(repo, "hash-object", "--stdin", input=b"hello\n")
    assert sha == "ce013625030ba8dba906f756967f9e9ca394464a"


def test_a_hung_command_is_killed_at_its_timeout(repo: Path) -> None:
    # A credential helper that never answers stands in for a hung remote.
    hang = "!f() { sleep 30; }; f"
    with pytest.raises(GitError, match=r"timed out after 0\.5 s"):
        run_git(
            repo,
            "-c",
            f"credential.helper={hang}",
            "credential",
            "fill",
            input="protocol=https\nhost=example.invalid\n\n",
            timeout_s=0.5,
        )


def test_git_never_prompts_for_credentials(repo: Path) -> None:
    # No credential helper: git would ask at the terminal, and a worker would wait for ever.
    result = run_git(
        repo,
        "-c",
        "credential.helper=",
        "credential",
        "fill",
        input="protocol=https\nhost=example.invalid\n\n",
        check=False,
        timeout_s=30,
    )
    assert not result.ok
    assert "terminal prompts disabled" in result.stderr


def test_a_missing_directory_and_a_missing_git_are_told_apart(tmp_path: Path) -> None:
    with pytest.raises(GitError, match="no such directory"):
        git(tmp_path / "nowhere", "status")
    with pytest.raises(GitError, match="git is not installed"):
        git(tmp_path, "status", env={"PATH": str(tmp_path)})
    assert os.environ.get("PATH")  # the caller's environment is untouched


def test_git_answers_in_english_whatever_the_callers_locale(
    repo: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # In German git says "Schwerwiegend:" for "fatal:"; callers match git's English words.
    monkeypatch.setenv("LC_ALL", "C.UTF-8")
    monkeypatch.setenv("LANGUAGE", "de")
    with pytest.raises(GitError) as failed:
        git(repo, "rev-parse", "--verify", "no-such-ref")
    assert failed.value.message.endswith(": Needed a single revision")
    assert git(repo, "-c", "alias.locale=!echo $LC_ALL/$LANGUAGE", "locale") == "C/C"


def test_git_s_complaint_is_printable_even_when_output_keeps_raw_bytes(repo: Path) -> None:
    # A name that is not UTF-8 comes back inside git's complaint about it.
    result = run_git(repo, "rev-parse", "bad\udcffname", check=False, errors="surrogateescape")
    assert not result.ok and "bad\ufffdname" in result.stderr
    result.stderr.encode("utf-8")  # no lone surrogate left to break a print


def test_a_caller_expecting_some_failures_raises_the_others_in_the_same_words(
    repo: Path,
) -> None:
    args = ("rev-parse", "--verify", "no-such-ref")
    result = run_git(repo, *args, check=False)
    with pytest.raises(GitError) as checked:
        run_git(repo, *args)
    raised = failure(repo, args, result)
    assert raised.message == checked.value.message
    assert raised.returncode == checked.value.returncode == 128
    assert raised.git_args == args


def test_a_refusal_keeps_the_words_that_say_why_not_only_gits_last_line(
    repo: Path, tmp_path: Path
) -> None:
    # A hook's own explanation, printed before git's "failed to push some refs", and gpg's
    # "failed to sign", before "failed to write commit object", were dropped: the reason shown
    # was git's summary alone.
    remote = tmp_path / "remote.git"
    git(tmp_path, "init", "-q", "--bare", str(remote))
    hook = repo / ".git" / "hooks" / "pre-push"
    hook.write_text('#!/bin/sh\necho "pre-push: git-lfs was not found on your path" >&2\nexit 1\n')
    hook.chmod(0o755)
    with pytest.raises(GitError) as refused:
        git(repo, "push", "-q", str(remote), "main")
    assert "git-lfs was not found on your path" in refused.value.message
    assert "failed to push some refs" in refused.value.message
    signing = ("-c", "commit.gpgsign=true", "-c", "gpg.program=false", "-c", "user.signingkey=X")
    with pytest.raises(GitError) as unsigned:
        git(repo, *signing, "-c", "user.name=t", "-c", "user.email=t@t",
            "commit", "--allow-empty", "-m", "z")  # fmt: skip
    said = unsigned.value.message
    assert "gpg failed to sign the data" in said and "failed to write commit object" in said


def test_git_started_from_a_hook_works_on_the_repository_it_is_told_not_the_hooks(
    repo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Under `git bisect run` (or a hook) GIT_DIR points at the caller's repository: a test
    # run so made the developer's repository bare and rewrote its user and origin.
    theirs = tmp_path / "theirs"
    git(tmp_path, "init", "-q", str(theirs))
    before = (theirs / ".git" / "config").read_text()
    monkeypatch.setenv("GIT_DIR", str(theirs / ".git"))
    monkeypatch.setenv("GIT_INDEX_FILE", str(theirs / ".git" / "index"))
    fresh = tmp_path / "fresh"
    run_git(tmp_path, "init", "-q", str(fresh))
    run_git(fresh, "config", "user.name", "Dee")
    assert run_git(repo, "rev-parse", "--show-toplevel").stdout.strip() == str(repo)
    assert (fresh / ".git" / "config").read_text().count("Dee") == 1
    assert (theirs / ".git" / "config").read_text() == before
