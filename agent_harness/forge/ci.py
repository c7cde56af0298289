"""Local CI for the forge: run one command on each open pull request's head, post a check run.

`forge serve --ci 'COMMAND'` runs it in the background; the demo and tests call `scan_once`
when they want CI to have looked. The command runs in a throwaway checkout of the head, with
only PATH, HOME and the locale from the forge's environment (never a token), and its exit
status becomes the run's conclusion, the last lines of its output the run's text. Stopping
the forge ends a command still running (its whole process group) and posts nothing for it.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from agent_harness.forge.errors import ApiError
from agent_harness.git.runner import run_git

if TYPE_CHECKING:
    from agent_harness.forge.core import Forge

_PASSED_ON = ("PATH", "HOME", "LANG", "LC_ALL", "TMPDIR")
TAIL_CHARS = 3000
STOP_POLL_S = 0.2  # how often a running command looks whether CI was asked to stop
STOP_JOIN_S = 10.0  # how long `stop` waits for the scan to wind down


@dataclass(frozen=True)
class CiResult:
    repo: str
    pull: int
    sha: str
    conclusion: str
    tail: str


class LocalCI:
    """CI on this machine for every repository of one forge."""

    def __init__(
        self, forge: Forge, command: str, *, name: str = "local-ci", timeout_s: float = 600.0
    ) -> None:
        self.forge = forge
        self.command = command
        self.name = name
        self.timeout_s = timeout_s
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def pending(self) -> list[tuple[str, str, int, str]]:
        """(owner, repo, pull number, head sha) of open pulls whose head has no run yet."""
        db = self.forge.db
        rows = db.all(
            "SELECT users.login, repos.name, repos.id AS repo_id, issues.number, pulls.head_ref"
            " FROM pulls JOIN issues ON issues.id = pulls.issue_id"
            " JOIN repos ON repos.id = issues.repo_id JOIN users ON users.id = repos.owner_id"
            " WHERE issues.state = 'open' ORDER BY issues.id"
        )
        out = []
        for row in rows:
            git = self.forge.repo_context(row["login"], row["name"], self.forge.renderer())
            sha = git.git.resolve(f"refs/heads/{row['head_ref']}") if git else None
            if sha is None:
                continue
            seen = db.one(
                "SELECT 1 FROM check_runs WHERE repo_id = ? AND head_sha = ? AND name = ?",
                row["repo_id"],
                sha,
                self.name,
            )
            if seen is None:
                out.append((row["login"], row["name"], int(row["number"]), sha))
        return out

    def scan_once(self) -> list[CiResult]:
        """Run the command on every head not yet run, and post each result."""
        results = []
        for owner, name, number, sha in self.pending():
            if self._stop.is_set():
                break
            ran = self._run(self.forge.repo_path(owner, name), sha)
            if ran is None:
                break  # stopped while it ran: no result to post
            conclusion, tail = ran
            summary = f"`{self.command}` {'passed' if conclusion == 'success' else 'failed'}"
            body = {
                "name": self.name,
                "head_sha": sha,
                "conclusion": conclusion,
                "output": {"title": self.name, "summary": summary, "text": tail},
            }
            try:
                self.forge.perform("POST", f"/repos/{owner}/{name}/check-runs", body)
            except ApiError:
                continue  # the head moved on meanwhile: the next scan runs the new one
            results.append(CiResult(f"{owner}/{name}", number, sha, conclusion, tail))
        return results

    def _run(self, bare: Path, sha: str) -> tuple[str, str] | None:
        work = Path(tempfile.mkdtemp(prefix="forge-ci-"))
        checkout = work / "w"
        repo = bare.absolute()
        git = ("--git-dir", str(repo))
        try:
            run_git(repo, *git, "worktree", "add", "--detach", "--quiet", str(checkout), sha)
            env = {k: v for k, v in os.environ.items() if k in _PASSED_ON}
            return self._command(checkout, env)
        finally:
            run_git(repo, *git, "worktree", "remove", "--force", str(checkout), check=False)
            shutil.rmtree(work, ignore_errors=True)
            run_git(repo, *git, "worktree", "prune", check=False)

    def _command(self, checkout: Path, env: dict[str, str]) -> tuple[str, str] | None:
        """The command in `checkout`: (conclusion, output tail), or None when `stop` came
        first. It runs in a process group of its own, ended whole on a timeout or a stop."""
        deadline = time.monotonic() + self.timeout_s
        with subprocess.Popen(
            self.command,
            shell=True,
            cwd=checkout,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            start_new_session=True,
        ) as proc:
            while True:
                try:
                    out, _ = proc.communicate(timeout=STOP_POLL_S)
                    break
                except subprocess.TimeoutExpired:
                    if not self._stop.is_set() and time.monotonic() < deadline:
                        continue
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(proc.pid, signal.SIGKILL)  # its own group: the command's
                proc.communicate()
                if self._stop.is_set():
                    return None
                return "timed_out", f"no result after {self.timeout_s:.0f} s"
        said = (out or "")[-TAIL_CHARS:]
        return ("success" if proc.returncode == 0 else "failure"), said

    def start(self, interval_s: float = 1.0) -> None:
        """Scan in the background every `interval_s` seconds until `stop`."""

        def loop() -> None:
            while not self._stop.wait(interval_s):
                self.scan_once()

        self._thread = threading.Thread(target=loop, name="forge-ci", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        """Stop scanning; a command running now is ended, and its result not posted."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=STOP_JOIN_S)
