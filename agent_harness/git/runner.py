"""The one way harness code runs git: a checked result, a timeout, and never a prompt.

Every git call in the harness goes through `run_git`. A failure raises `GitError` naming the
command, the directory and git's own explanation (its `fatal:` line, in English whatever the
user's locale, since callers read git's words); a call that outlives its timeout is killed with
everything it started; and git is told never to ask for credentials, because a prompt nobody
answers would hold a worker for ever. (A plain subprocess call: the GitPython layer could
neither feed `git apply` its patch on stdin nor give git's own words.)
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from agent_harness.errors import HarnessError

GIT_TIMEOUT_S = 600.0
# A credential prompt would hang a worker for ever: git (and ssh under it) must fail instead.
NO_PROMPT = {"GIT_TERMINAL_PROMPT": "0", "GIT_ASKPASS": "", "SSH_ASKPASS": ""}
# Callers match git's messages ("fatal:", "nothing to commit"): a translation would hide them.
ENGLISH = {"LANGUAGE": "C", "LC_ALL": "C"}
# What tells git which repository to work on whatever the directory (`git rev-parse
# --local-env-vars`). A harness started from a git hook, `git bisect run` or `git rebase
# --exec` inherits GIT_DIR: every worktree, branch and config write then went to that
# repository (it was made bare, its user and origin rewritten), not the one named.
LOCAL_REPO_ENV = (
    "GIT_ALTERNATE_OBJECT_DIRECTORIES", "GIT_CONFIG", "GIT_CONFIG_PARAMETERS", "GIT_CONFIG_COUNT",
    "GIT_OBJECT_DIRECTORY", "GIT_DIR", "GIT_WORK_TREE", "GIT_IMPLICIT_WORK_TREE",
    "GIT_GRAFT_FILE", "GIT_INDEX_FILE", "GIT_NO_REPLACE_OBJECTS", "GIT_REPLACE_REF_BASE",
    "GIT_PREFIX", "GIT_INTERNAL_SUPER_PREFIX", "GIT_SHALLOW_FILE", "GIT_COMMON_DIR",
)  # fmt: skip


def without_local_repo(env: Mapping[str, str]) -> dict[str, str]:
    """`env` without the variables that point git at one repository (LOCAL_REPO_ENV)."""
    return {name: value for name, value in env.items() if name not in LOCAL_REPO_ENV}


class GitError(HarnessError):
    """A git command failed, timed out, or git could not be run at all."""

    def __init__(self, message: str, *, args: tuple[str, ...] = (), returncode: int | None = None):
        self.git_args = args
        self.returncode = returncode
        super().__init__(message)


@dataclass(frozen=True)
class GitResult:
    """What one git command did: its exit status, its output and its messages, decoded."""

    returncode: int
    stdout: str
    stderr: str

    @property
    def ok(self) -> bool:
        return self.returncode == 0


def run_git(
    cwd: Path | str,
    *args: str,
    check: bool = True,
    timeout_s: float = GIT_TIMEOUT_S,
    input: str | bytes | None = None,
    env: Mapping[str, str] | None = None,
    errors: str = "replace",
) -> GitResult:
    """Run `git <args>` in `cwd` and return what it printed.

    With `check` (the default) a non-zero exit raises `GitError`; without it the caller reads
    `returncode`. A timeout always raises: half a git command is never an answer. `env` adds to
    (and may override) the process environment, which holds no credentials (see
    `agent_harness.secrets.process`). Output is decoded as UTF-8 with `errors`; git's messages
    always with "replace", because they end up in an error that must print.
    """
    command = ("git", *args)
    full_env = {**without_local_repo(os.environ), **ENGLISH, **NO_PROMPT, **(env or {})}
    data = input.encode("utf-8") if isinstance(input, str) else input
    try:
        process = subprocess.Popen(
            command,
            cwd=cwd,
            env=full_env,
            stdin=subprocess.PIPE if data is not None else subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            start_new_session=True,  # a timeout kills git and whatever it started (ssh, hooks)
        )
    except FileNotFoundError as exc:
        if not Path(cwd).is_dir():
            raise GitError(f"cannot run git in {cwd}: no such directory", args=args) from exc
        raise GitError("git is not installed (or not on PATH)", args=args) from exc
    except OSError as exc:
        raise GitError(f"cannot run git in {cwd}: {exc.strerror or exc}", args=args) from exc
    try:
        out, err = process.communicate(data, timeout=timeout_s)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(process.pid, signal.SIGKILL)
        process.communicate()
        raise GitError(
            f"git {_short(args)} timed out after {timeout_s:g} s in {cwd}", args=args
        ) from None
    result = GitResult(
        process.returncode, out.decode("utf-8", errors), err.decode("utf-8", "replace")
    )
    if check and not result.ok:
        raise failure(cwd, args, result)
    return result


def git(cwd: Path | str, *args: str, **options: object) -> str:
    """`run_git(...)`'s output with the trailing newline removed; raises on any failure."""
    result = run_git(cwd, *args, **options)  # type: ignore[arg-type]
    return result.stdout.rstrip("\n")


def failure(cwd: Path | str, args: tuple[str, ...], result: GitResult) -> GitError:
    """The `GitError` for a failed result, for a caller that ran with `check=False` and found
    the failure was not one it expected (the same words `run_git` would have used)."""
    return GitError(
        f"git {_short(args)} failed in {cwd}: {explain(result)}",
        args=args,
        returncode=result.returncode,
    )


# How much of git's complaint a failure keeps: the lines that explain it (a hook's words, ssh's,
# gpg's) come before git's own summary, so a few are kept with it.
_EXPLAIN_BEFORE = 3
_EXPLAIN_MAX = 600


def explain(result: GitResult) -> str:
    """git's own words for a failure: every `error:` and `fatal:` line, after up to three lines
    printed before the first of them (what a hook, ssh or gpg said: "pre-push: git-lfs was not
    found", "ssh: connect ... refused"), joined by "; "; else its last line. Hints are left
    out."""
    lines = [
        line.strip()
        for line in result.stderr.splitlines()
        if line.strip() and not line.lstrip().startswith("hint:")
    ]
    prefixes = ("fatal:", "error:")
    first = next((i for i, line in enumerate(lines) if line.startswith(prefixes)), None)
    if first is None:
        return lines[-1][:_EXPLAIN_MAX] if lines else f"exit status {result.returncode}"
    said = lines[max(0, first - _EXPLAIN_BEFORE) : first]
    for line in lines[first:]:
        if line.startswith(prefixes):
            words = line.split(":", 1)[1].strip()
            if words not in said:
                said.append(words)
    return "; ".join(said)[:_EXPLAIN_MAX]


def _short(args: tuple[str, ...]) -> str:
    """The subcommand and its first argument, skipping `-c key=value` settings."""
    words: list[str] = []
    skip = False
    for arg in args:
        if skip:
            skip = False
            continue
        if arg == "-c":
            skip = True
            continue
        words.append(arg)
        if len(words) == 2:
            break
    return " ".join(words)
