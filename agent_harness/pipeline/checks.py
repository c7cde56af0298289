"""Run an item's check commands (tests, lint) in its worktree, cheapest first, with timeouts.

Checks are the cheap gate before any reviewer is paid. Each command runs through
`sessions.groups`: under `/bin/sh -c` as the leader of its own process group, with output going
to a file rather than a pipe, its group ended by a timeout, written down while it runs, and
ended by the item's next attempt when a run killed outright left it running.
"""

from __future__ import annotations

import itertools
import math
import os
import re
import shlex
import shutil
import tempfile
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO

from agent_harness.secrets.redact import masked_output
from agent_harness.sessions.groups import SHELL, run_in_group

TAIL_BYTES = 3072


# dash says "sh: 1: prog: not found", bash "sh: line 1: prog: command not found". With exit
# 127, dash says "prog: Permission denied" when the one folder on PATH holding `prog` may not
# be searched by this user: for the check, that program is just as absent.
_NOT_FOUND = re.compile(r"([^\s:]+): (?:command )?(not found|Permission denied)")


@dataclass(frozen=True)
class CheckResult:
    """One check command's outcome. `exit_code` is None when it timed out or never started."""

    command: str
    exit_code: int | None
    duration_s: float
    output_tail: str
    timed_out: bool = False
    missing: bool = False
    program: str | None = None  # the program the shell did not find, when `missing`

    @property
    def passed(self) -> bool:
        return self.exit_code == 0 and not self.timed_out and not self.missing

    @property
    def status(self) -> str:
        """A few words for tables and one-line reports."""
        if self.timed_out:
            return "timed out"
        if self.missing:
            return "program not found"
        if self.exit_code is None:
            return "could not start"
        if self.exit_code < 0:
            return f"killed by signal {-self.exit_code}"
        return "passed" if self.exit_code == 0 else f"failed (exit {self.exit_code})"


@dataclass(frozen=True)
class CheckRun:
    """The checks of one attempt, in the order they ran. `skipped` lists the commands not run
    because an earlier one failed. An empty run passes: no checks configured, nothing failed."""

    results: tuple[CheckResult, ...]
    skipped: tuple[str, ...] = ()

    @property
    def passed(self) -> bool:
        return all(result.passed for result in self.results)

    @property
    def first_failure(self) -> CheckResult | None:
        return next((result for result in self.results if not result.passed), None)

    def durations(self) -> dict[str, float]:
        """Measured seconds per command, to feed `order_checks` for the next item. A timed-out
        command's time is a lower bound, which still ranks it as expensive."""
        return {result.command: result.duration_s for result in self.results}

    def table_markdown(self) -> str:
        """A markdown table (command, result, seconds) for pull-request bodies and prompts."""
        lines = ["| command | result | seconds |", "| --- | --- | ---: |"]
        for result in self.results:
            lines.append(
                f"| {_code_cell(result.command)} | {result.status} | {result.duration_s:.1f} |"
            )
        for command in self.skipped:
            lines.append(f"| {_code_cell(command)} | not run | – |")
        return "\n".join(lines)


def _code_cell(text: str) -> str:
    # A code span must be fenced by more backticks than it contains; `|` would end the cell.
    longest = max((len(run) for run in re.findall(r"`+", text)), default=0)
    fence = "`" * (longest + 1)
    body = " ".join(text.split()).replace("|", "\\|")
    pad = " " if body.startswith("`") or body.endswith("`") else ""
    return f"{fence}{pad}{body}{pad}{fence}"


def order_checks(commands: Sequence[str], durations: Mapping[str, float]) -> list[str]:
    """Put measured commands cheapest first, leaving unmeasured ones exactly where they are.

    The commands with a measurement in `durations` are sorted by it (ties keep their given
    order) and put back into the positions that measured commands held; every command without
    a measurement (or with a NaN or negative one) keeps its own position. So the user's order
    stands until there is evidence, and evidence never moves a command nobody has timed:
    `[slow(9s), new, fast(1s)]` becomes `[fast, new, slow]`.
    """
    known = [
        index
        for index, command in enumerate(commands)
        if command in durations and _usable(durations[command])
    ]
    ranked = sorted(known, key=lambda index: durations[commands[index]])  # sorted() is stable
    ordered = list(commands)
    for slot, source in zip(known, ranked, strict=True):
        ordered[slot] = commands[source]
    return ordered


def _usable(seconds: float) -> bool:
    return not math.isnan(seconds) and seconds >= 0


def run_checks(
    commands: Sequence[str],
    cwd: Path,
    *,
    timeout_s: float,
    env: Mapping[str, str],
    stop_on_failure: bool = True,
    clock: Callable[[], float] = time.monotonic,
    kill_grace_s: float = 2.0,
    group_file: Path | None = None,
) -> CheckRun:
    """Run `commands` in order in `cwd` with exactly `env` (nothing of ours is merged in: the
    caller has already removed secrets). With `stop_on_failure` the rest are skipped after the
    first failure. A command that outlives `timeout_s` gets SIGTERM, then SIGKILL after
    `kill_grace_s`, sent to its whole process group. While a command runs, its group is
    written to `group_file` (for `stop_leftover`)."""
    results: list[CheckResult] = []
    for index, command in enumerate(commands):
        result = run_check(
            command,
            cwd,
            timeout_s=timeout_s,
            env=env,
            clock=clock,
            kill_grace_s=kill_grace_s,
            group_file=group_file,
        )
        results.append(result)
        if stop_on_failure and not result.passed:
            return CheckRun(tuple(results), tuple(commands[index + 1 :]))
    return CheckRun(tuple(results))


def run_check(
    command: str,
    cwd: Path,
    *,
    timeout_s: float,
    env: Mapping[str, str],
    clock: Callable[[], float] = time.monotonic,
    kill_grace_s: float = 2.0,
    group_file: Path | None = None,
) -> CheckResult:
    """Run one check command; see `run_checks`."""
    with tempfile.TemporaryFile() as sink:
        started = clock()
        try:
            end = run_in_group(
                command,
                cwd,
                env=env,
                timeout_s=timeout_s,
                output=sink,
                kill_grace_s=kill_grace_s,
                group_file=group_file,
            )
        except OSError as exc:
            reason = f"could not start {SHELL} in {cwd}: {exc.strerror or exc}"
            return CheckResult(command, None, max(0.0, clock() - started), reason)
        exit_code, timed_out = end.exit_code, end.timed_out
        duration = max(0.0, clock() - started)
        # Masked where it is read: a check that found a credential (a parent's environment, a
        # file) would carry it into the events, the table and the next attempt's prompt.
        tail = masked_output(read_tail(sink))
    if timed_out:
        note = f"[agent-harness: timed out after {timeout_s:g} s; the process group was killed]"
        return CheckResult(command, None, duration, _join(tail, note), timed_out=True)
    if exit_code == 127:
        found = _NOT_FOUND.findall(tail)
        if found:
            program, how = found[-1]
            path = env.get("PATH")
            where = f"PATH={path}" if path is not None else "PATH is not set in the check's env"
            if how == "Permission denied":
                where = f"a folder on PATH may not be searched by this user; {where}"
            note = f"[agent-harness: program not found: {program} ({where})]"
            return CheckResult(
                command, None, duration, _join(tail, note), missing=True, program=program
            )
    return CheckResult(command, exit_code, duration, tail)


def read_tail(sink: IO[bytes]) -> str:
    """The last `TAIL_BYTES` of what a command wrote to `sink`, from a line's start."""
    size = sink.seek(0, os.SEEK_END)
    start = max(0, size - TAIL_BYTES)
    sink.seek(start)
    data = sink.read()
    if start == 0:
        return data.decode("utf-8", errors="replace")
    # Start at a line boundary when one is near, so the tail does not open mid-line.
    newline = data.find(b"\n", 0, 200)
    if newline != -1:
        start += newline + 1
        data = data[newline + 1 :]
    text = data.decode("utf-8", errors="replace").lstrip("\ufffd")
    return f"[… {start} earlier bytes not shown]\n{text}"


def _join(tail: str, note: str) -> str:
    return f"{tail.rstrip()}\n{note}" if tail.strip() else note


# Words a shell runs itself: their "program" cannot be looked up on PATH.
_SHELL_WORDS = frozenset(
    {".", ":", "[", "[[", "!", "cd", "command", "eval", "exec", "export", "for", "if", "set",
     "source", "test", "true", "false", "while", "until", "case", "{", "(", "env", "time"}
)  # fmt: skip
_ASSIGNMENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*=")


def not_found(command: str, program: str, env: Mapping[str, str]) -> str:
    """Why a check cannot run on this machine: its program is not on the checks' PATH."""
    return (
        f"check `{command}`: {program} is not found on the checks' PATH "
        f"({env.get('PATH', 'PATH is not set')}); install it, or fix the check"
    )


def absent_for_good(result: CheckResult, env: Mapping[str, str], worktree: Path) -> str | None:
    """The program a check found missing when no attempt can bring it: a bare name the check
    command itself runs, still not on the checks' PATH, none of whose folders is relative or
    inside the worktree (where an agent's change could put it, as `npm install` fills
    `node_modules/.bin`). None when the check did not miss a program, or when another attempt
    might."""
    program = result.program if result.missing else None
    if program is None or "/" in program or program not in _words(result.command):
        # Not a program the check names itself: one a script it runs names (an npm script,
        # a Makefile), which the agent's change may have brought in.
        return None
    folders = [f for f in env.get("PATH", "").split(os.pathsep) if f]
    tree = Path(worktree).resolve()
    if any(not os.path.isabs(f) or Path(f).resolve().is_relative_to(tree) for f in folders):
        return None
    if shutil.which(program, path=os.pathsep.join(folders)) is not None:
        return None  # there now (installed meanwhile): the next attempt may find it
    return program


def _words(command: str) -> list[str]:
    """The words of `command` as the shell splits them; none when it does not parse (the
    shell will say what is wrong with it)."""
    try:
        return shlex.split(command, comments=True)
    except ValueError:
        return []


def missing_program(command: str, env: Mapping[str, str]) -> str | None:
    """The program `command` starts that cannot be found as the check would run it (on the
    `PATH` of `env`), or None. Only what can be judged before any work is judged: a command
    the shell runs itself, or a path inside the repository (the agent may create it), passes."""
    words = list(itertools.dropwhile(_ASSIGNMENT.match, _words(command)))
    if not words or words[0] in _SHELL_WORDS:
        return None
    program = words[0]
    if "/" in program:
        if os.path.isabs(program) and not os.access(program, os.X_OK):
            return program
        return None
    return None if shutil.which(program, path=env.get("PATH", "")) else program
