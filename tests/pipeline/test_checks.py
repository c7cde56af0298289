"""Check commands as real subprocesses: exit codes, missing programs, timeouts that kill the
whole process tree, the exact environment, and the cheapest-first order."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import pytest

from agent_harness.pipeline.attempt import Attempt
from agent_harness.pipeline.checks import (
    TAIL_BYTES,
    CheckResult,
    CheckRun,
    order_checks,
    run_checks,
)
from agent_harness.sessions.groups import stop_leftover
from agent_harness.sessions.processes import stat_fields
from agent_harness.store.events import WorktreeReady
from agent_harness.testing.clock import FakeClock

from .conftest import Rig

ENV = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "LC_ALL": "C"}


class Ticks(FakeClock):
    """The shared fake clock, moved one second by each reading, so durations are exact and
    real time is never measured."""

    def __init__(self) -> None:
        super().__init__(start=100.0)

    def __call__(self) -> float:
        self.advance(1.0)
        return self.now


def _alive(pid: int) -> bool:
    # A killed process whose parent never reaps it is a zombie: dead, but still in /proc.
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


def _dies(pid: int, polls: int = 200) -> bool:
    """Whether an orphan we SIGKILLed is gone within `polls` looks 5 ms apart (a second by
    default): the kernel takes a moment to tear it down and nobody we can wait() on is its
    parent any more."""
    for _ in range(polls):
        if not _alive(pid):
            return True
        time.sleep(0.005)
    return False


@pytest.mark.integration
def test_passing_and_failing_commands_report_exit_codes_and_combined_output(
    tmp_path: Path,
) -> None:
    run = run_checks(
        ["echo to-out; echo to-err >&2", "echo broken >&2; exit 3"],
        tmp_path,
        timeout_s=10,
        env=ENV,
        clock=Ticks(),
    )
    first, second = run.results
    assert first.passed and first.exit_code == 0
    assert first.output_tail == "to-out\nto-err\n"
    assert first.duration_s == 1.0
    assert not second.passed and second.exit_code == 3
    assert "broken" in second.output_tail
    assert not run.passed
    assert run.first_failure == second


@pytest.mark.integration
def test_a_credential_in_a_checks_output_is_masked_in_its_tail(tmp_path: Path) -> None:
    # A check that found a token (a parent's environment, a file) prints it: the tail goes to
    # the events, the run's table and the next prompt, so it holds a mask instead.
    token = "ghp_" + "C4nary0123456789abcdefghijklmnopqrstu"
    command = f"printf 'token=%s%s\\n' {token[:10]} {token[10:]}; exit 1"
    [result] = run_checks([command], tmp_path, timeout_s=10, env=ENV).results
    assert token not in result.output_tail and "token=[redacted" in result.output_tail


@pytest.mark.integration
def test_commands_run_in_cwd_with_exactly_the_env_given(tmp_path: Path) -> None:
    os.environ["AGENT_HARNESS_TEST_LEAK"] = "leaked"
    try:
        run = run_checks(
            ['pwd; echo "leak=${AGENT_HARNESS_TEST_LEAK:-none} mine=$MINE"'],
            tmp_path,
            timeout_s=10,
            env={**ENV, "MINE": "yes"},
        )
    finally:
        del os.environ["AGENT_HARNESS_TEST_LEAK"]
    lines = run.results[0].output_tail.splitlines()
    assert Path(lines[0]).resolve() == tmp_path.resolve()
    assert lines[1] == "leak=none mine=yes"


@pytest.mark.integration
def test_stdin_is_empty_so_a_prompting_check_cannot_wait_for_input(tmp_path: Path) -> None:
    run = run_checks(["read answer; echo got=$?"], tmp_path, timeout_s=10, env=ENV)
    assert run.results[0].output_tail.strip() == "got=1"


@pytest.mark.integration
def test_a_missing_program_is_reported_as_missing_with_the_path_searched(tmp_path: Path) -> None:
    [result] = run_checks(["no-such-linter-xyz --strict"], tmp_path, timeout_s=10, env=ENV).results
    assert result.missing and not result.passed
    assert result.exit_code is None
    assert "program not found: no-such-linter-xyz" in result.output_tail
    assert f"PATH={ENV['PATH']}" in result.output_tail
    assert result.status == "program not found"


@pytest.mark.integration
def test_a_program_in_a_path_folder_the_user_may_not_search_is_reported_missing(
    tmp_path: Path,
) -> None:
    # What dash prints, with exit 127, when the only PATH folder holding the program is closed
    # to this user (root is never refused, so the line is written here as dash writes it).
    shell_said = "echo 'sh: 1: make: Permission denied' >&2; exit 127"
    [result] = run_checks([shell_said], tmp_path, timeout_s=10, env=ENV).results
    assert result.missing and result.status == "program not found"
    assert "program not found: make (a folder on PATH may not be searched" in result.output_tail


@pytest.mark.integration
def test_only_a_program_no_change_to_the_worktree_can_bring_is_absent_for_good(
    tmp_path: Path,
) -> None:
    from agent_harness.pipeline.checks import absent_for_good

    def first(command: str, env: dict[str, str]) -> str | None:
        [result] = run_checks([command], tmp_path, timeout_s=10, env=env).results
        assert result.missing
        return absent_for_good(result, env, tmp_path)

    # A bare name on a PATH of the machine's folders: no agent can install it.
    assert first("cd . && no-such-linter-xyz", ENV) == "no-such-linter-xyz"
    # A script of the repository's own, or a PATH folder inside the worktree (`npm install`
    # fills node_modules/.bin): another attempt's change may bring it.
    assert first("cd . && ./scripts/no-such-lint.sh", ENV) is None
    inside = {**ENV, "PATH": f"{tmp_path / 'node_modules' / '.bin'}{os.pathsep}{ENV['PATH']}"}
    assert first("cd . && no-such-linter-xyz", inside) is None
    relative = {**ENV, "PATH": f"node_modules/.bin{os.pathsep}{ENV['PATH']}"}
    assert first("cd . && no-such-linter-xyz", relative) is None
    # One a script the check runs names (an npm script the agent changed to a tool it never
    # added): the agent's to fix.
    script = tmp_path / "test.sh"
    script.write_text("#!/bin/sh\nno-such-runner-xyz\n")
    script.chmod(0o755)
    assert first(f"cd . && sh {script}", ENV) is None


@pytest.mark.integration
def test_a_missing_program_says_when_path_is_not_set(tmp_path: Path) -> None:
    [result] = run_checks(["no-such-linter-xyz"], tmp_path, timeout_s=10, env={}).results
    assert result.missing
    assert "PATH is not set" in result.output_tail


@pytest.mark.integration
def test_a_script_exiting_127_on_its_own_is_a_failure_not_a_missing_program(
    tmp_path: Path,
) -> None:
    [result] = run_checks(["echo all good; exit 127"], tmp_path, timeout_s=10, env=ENV).results
    assert not result.missing
    assert result.exit_code == 127


@pytest.mark.integration
def test_a_missing_working_directory_means_the_check_could_not_start(tmp_path: Path) -> None:
    [result] = run_checks(["true"], tmp_path / "gone", timeout_s=10, env=ENV).results
    assert result.exit_code is None and not result.passed
    assert result.status == "could not start"
    assert "could not start" in result.output_tail


@pytest.mark.integration
def test_stop_on_failure_skips_the_rest_and_lists_them(tmp_path: Path) -> None:
    marker = tmp_path / "ran"
    run = run_checks(["true", "false", f"touch {marker}"], tmp_path, timeout_s=10, env=ENV)
    assert [r.command for r in run.results] == ["true", "false"]
    assert run.skipped == (f"touch {marker}",)
    assert not marker.exists()
    assert "| not run |" in run.table_markdown()


@pytest.mark.integration
def test_without_stop_on_failure_every_command_runs(tmp_path: Path) -> None:
    marker = tmp_path / "ran"
    run = run_checks(
        ["false", f"touch {marker}"], tmp_path, timeout_s=10, env=ENV, stop_on_failure=False
    )
    assert len(run.results) == 2 and run.skipped == ()
    assert marker.exists()


@pytest.mark.integration
def test_a_hang_times_out_and_kills_the_child_it_spawned(tmp_path: Path) -> None:
    pid_file = tmp_path / "child.pid"
    # The shell starts a child that hangs and waits for it: both must die at the timeout.
    command = f"sleep 30 & echo $! > {pid_file}; echo started; wait"
    [result] = run_checks([command], tmp_path, timeout_s=0.5, env=ENV, kill_grace_s=0.2).results
    assert result.timed_out and not result.passed
    assert result.exit_code is None
    assert result.output_tail.startswith("started\n")
    assert "timed out after 0.5 s" in result.output_tail
    assert _dies(int(pid_file.read_text()))


@pytest.mark.integration
def test_a_child_that_ignores_sigterm_is_still_killed(tmp_path: Path) -> None:
    pid_file = tmp_path / "child.pid"
    command = f"sh -c 'trap \"\" TERM; sleep 30' & echo $! > {pid_file}; wait"
    [result] = run_checks([command], tmp_path, timeout_s=0.5, env=ENV, kill_grace_s=0.2).results
    assert result.timed_out
    assert _dies(int(pid_file.read_text()))


@pytest.mark.integration
def test_a_background_job_left_behind_neither_hangs_the_check_nor_survives_it(
    tmp_path: Path,
) -> None:
    pid_file = tmp_path / "child.pid"
    # The leftover keeps the output open; with a pipe, reading to EOF would wait 30 s.
    command = f"sleep 30 & echo $! > {pid_file}; echo done"
    [result] = run_checks([command], tmp_path, timeout_s=10, env=ENV).results
    assert result.passed and result.output_tail == "done\n"
    assert _dies(int(pid_file.read_text()))


@pytest.mark.integration
def test_long_output_keeps_only_a_tail_and_says_how_much_was_cut(tmp_path: Path) -> None:
    command = "i=0; while [ $i -lt 2000 ]; do echo line-$i; i=$((i+1)); done; echo LAST"
    [result] = run_checks([command], tmp_path, timeout_s=10, env=ENV).results
    assert result.output_tail.rstrip().endswith("LAST")
    assert "line-0\n" not in result.output_tail
    assert "earlier bytes not shown" in result.output_tail.splitlines()[0]
    # The tail starts on a whole line, not in the middle of one.
    assert result.output_tail.splitlines()[1].startswith("line-")
    assert len(result.output_tail.encode()) <= TAIL_BYTES + 100


@pytest.mark.integration
def test_undecodable_output_is_decoded_leniently(tmp_path: Path) -> None:
    [result] = run_checks([r"printf 'caf\351 ok\n'"], tmp_path, timeout_s=10, env=ENV).results
    assert result.passed
    assert result.output_tail == "caf\ufffd ok\n"


@pytest.mark.integration
def test_a_signal_death_is_a_failure_named_after_the_signal(tmp_path: Path) -> None:
    [result] = run_checks(["kill -TERM $$"], tmp_path, timeout_s=10, env=ENV).results
    assert not result.passed
    assert result.status == "killed by signal 15"


# ------------------------------------------------- a check outliving a run killed outright


def _run_killed_in_its_check(tmp_path: Path, *, timeout_s: float, margin_s: float) -> int:
    """Start a run of one check (`sleep 30`, then a file written) in a process of its own, and
    SIGKILL that process while the check runs, as `kill -9` of `agent-harness run` would. Returns
    the process group of the check it left behind, as the check wrote it down."""
    group = tmp_path / "check.group"
    runner = textwrap.dedent(
        f"""
        from pathlib import Path
        from agent_harness.pipeline import checks
        from agent_harness.sessions import groups
        groups.ORPHAN_MARGIN_S = {margin_s}
        checks.run_checks(["sleep 30; echo late > late"], Path({str(tmp_path)!r}),
                          timeout_s={timeout_s}, env={ENV!r}, kill_grace_s=0.1,
                          group_file=Path({str(group)!r}))
        """
    )
    run = subprocess.Popen([sys.executable, "-c", runner])
    for _ in range(1000):
        if group.exists():
            break
        time.sleep(0.01)
    run.kill()
    run.wait()
    pgid = int(json.loads(group.read_text())["pgid"])
    assert _group_alive(pgid)  # nothing of the run is left to end it
    return pgid


def _group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    return _alive(pgid)


def _group_ends(pgid: int, polls: int) -> bool:
    for _ in range(polls):
        if not _group_alive(pgid):
            return True
        time.sleep(0.02)
    return False


@pytest.mark.integration
def test_a_check_names_its_process_group_while_it_runs_and_forgets_it_after(
    tmp_path: Path,
) -> None:
    group = tmp_path / "state" / "check.group"
    command = f"cat {group} > seen"  # written down before the check begins
    [result] = run_checks([command], tmp_path, timeout_s=10, env=ENV, group_file=group).results
    assert result.passed
    record = json.loads((tmp_path / "seen").read_text())
    assert record["pgid"] > 0 and set(record) == {"pgid", "start"}
    assert not group.exists()


def _stuck_note(group: Path) -> Path:
    """Make writing the note of `group` wait: its partial file is a named pipe nobody reads,
    so the run stays in the moment between starting its check and noting it (as a loaded
    machine's can, for a while) until the test reads the pipe."""
    group.parent.mkdir(parents=True, exist_ok=True)
    partial = group.with_name(group.name + ".partial")
    os.mkfifo(partial)
    return partial


def _child_of(parent: int, running: str) -> int:
    """The pid of a child process of `parent` whose command line holds `running`: a program
    of its own (a child between fork and exec still shows its parent's, Python's, line)."""
    for _ in range(2000):
        for entry in Path("/proc").glob("[0-9]*"):
            fields = stat_fields(int(entry.name))  # after the name: state, ppid, ...
            if fields is None or fields[1:2] != [str(parent)]:
                continue
            with contextlib.suppress(OSError):
                line = (entry / "cmdline").read_bytes()
                program = os.path.basename(line.split(b"\0")[0])
                if running.encode() in line and not program.startswith(b"python"):
                    return int(entry.name)
        time.sleep(0.005)
    raise AssertionError(f"process {parent} started nothing running {running!r}")


def _release(partial: Path) -> None:
    """Let a run waiting to write its note into `partial` go on (its write goes nowhere)."""
    with contextlib.suppress(OSError):
        os.close(os.open(partial, os.O_RDONLY | os.O_NONBLOCK))


@pytest.mark.integration
def test_a_check_begins_only_once_its_group_is_written_down_however_slow_the_note(
    tmp_path: Path,
) -> None:
    # The check must not get ahead of its note, or a run killed in that moment would leave a
    # check no later attempt knows of.
    group = tmp_path / "state" / "check.group"
    partial = _stuck_note(group)
    command = f"if [ -e {group} ]; then echo noted; else echo not yet; fi > seen"
    done: list[CheckRun] = []
    run = threading.Thread(
        target=lambda: done.append(
            run_checks([command], tmp_path, timeout_s=10, env=ENV, group_file=group)
        ),
        daemon=True,
    )
    run.start()
    try:
        check = _child_of(os.getpid(), "seen")
        with open(partial, encoding="utf-8") as note:  # the note gets written at last
            written = json.loads(note.read())
    finally:
        _release(partial)  # a failure above must not leave the run waiting for ever
        run.join(timeout=30)
    assert not run.is_alive()
    [result] = done[0].results
    assert result.passed, result.output_tail
    assert written["pgid"] == check
    assert (tmp_path / "seen").read_text() == "noted\n"


@pytest.mark.integration
def test_a_run_killed_before_its_check_is_written_down_leaves_no_check_running(
    tmp_path: Path,
) -> None:
    _stuck_note(tmp_path / "check.group")
    runner = textwrap.dedent(
        f"""
        from pathlib import Path
        from agent_harness.pipeline import checks
        checks.run_checks(["echo ran > ran"], Path({str(tmp_path)!r}), timeout_s=600,
                          env={ENV!r}, group_file=Path({str(tmp_path / "check.group")!r}))
        """
    )
    run = subprocess.Popen([sys.executable, "-c", runner])
    try:
        check = _child_of(run.pid, "ran")
    finally:
        run.kill()  # while it waits to write the check's note (or, failing, left to nothing)
        run.wait()
    assert _dies(check, polls=2000)  # it ends itself, unbegun
    assert not (tmp_path / "ran").exists()


@pytest.mark.integration
def test_the_next_attempt_ends_a_check_a_killed_run_left_in_the_worktree(
    tmp_path: Path,
) -> None:
    pgid = _run_killed_in_its_check(tmp_path, timeout_s=600, margin_s=30)
    assert stop_leftover(tmp_path / "check.group") == pgid
    assert _group_ends(pgid, 250)
    assert not (tmp_path / "late").exists()  # it never wrote into the worktree after
    assert not (tmp_path / "check.group").exists()
    assert stop_leftover(tmp_path / "check.group") is None  # nothing twice


@pytest.mark.integration
def test_a_check_left_by_a_killed_run_ends_itself_after_its_own_limit(tmp_path: Path) -> None:
    pgid = _run_killed_in_its_check(tmp_path, timeout_s=0.3, margin_s=0.0)
    assert _group_ends(pgid, 1500)  # under `timeout`: nobody else ends it here
    assert not (tmp_path / "late").exists()


@pytest.mark.integration
def test_an_attempt_ends_the_check_left_running_before_it_works_and_says_so(
    rig: Rig,
) -> None:
    leftover = subprocess.Popen(["sleep", "60"], start_new_session=True)
    try:
        plan, lease = rig.claim()
        parts = rig.parts()
        group = parts.item_dir("T1") / "check.group"
        group.parent.mkdir(parents=True)
        start = Path(f"/proc/{leftover.pid}/stat").read_text().rpartition(")")[2].split()[19]
        group.write_text(json.dumps({"pgid": leftover.pid, "start": start}))
        Attempt(parts, plan.item("T1"), lease).run()
        assert leftover.wait(timeout=10) == -signal.SIGKILL
    finally:
        leftover.kill()
    [ready] = [e.payload for e in rig.store.all_events(item="T1") if e.kind == "worktree"]
    assert isinstance(ready, WorktreeReady) and ready.stopped_check == leftover.pid
    assert rig.state().state == "pr_open"


@pytest.mark.unit
def test_a_noted_group_whose_id_another_process_now_has_is_left_alone(tmp_path: Path) -> None:
    group = tmp_path / "check.group"
    group.write_text(json.dumps({"pgid": os.getpid(), "start": "1"}))  # this test started later
    assert stop_leftover(group) is None
    assert not group.exists()


@pytest.mark.unit
@pytest.mark.parametrize("text", ["", "{", "[1]", '{"pgid": "x"}', '{"start": 5}'])
def test_an_unreadable_group_note_is_dropped_and_ends_nothing(tmp_path: Path, text: str) -> None:
    group = tmp_path / "check.group"
    group.write_text(text)
    assert stop_leftover(group) is None
    assert not group.exists()


@pytest.mark.integration
def test_a_timeout_other_than_gnus_is_not_used_to_wrap_a_check(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Busybox's `timeout` (Alpine) takes no --kill-after: every check failed with its usage.
    from agent_harness.sessions import groups

    tools = tmp_path / "bin"
    tools.mkdir()
    (tools / "timeout").write_text("#!/bin/sh\necho 'BusyBox v1.36 usage: timeout'\nexit 1\n")
    (tools / "timeout").chmod(0o755)
    monkeypatch.setenv("PATH", f"{tools}{os.pathsep}{os.environ['PATH']}")
    groups._gnu_timeout.cache_clear()  # looked for again, on this PATH
    try:
        [result] = run_checks(["echo ok"], tmp_path, timeout_s=10, env=ENV).results
        assert result.passed and result.output_tail == "ok\n"
        assert groups._gnu_timeout() is None
    finally:
        groups._gnu_timeout.cache_clear()  # the next test finds the machine's own


@pytest.mark.integration
def test_a_check_the_stopping_signal_reached_first_is_not_counted_failed(tmp_path: Path) -> None:
    # systemd stops a whole unit with SIGTERM: the check died of it a moment before the run
    # said it was stopping, and its worker recorded "killed by signal 15", an attempt spent.
    runner = textwrap.dedent(
        f"""
        import os, signal, threading, time
        from pathlib import Path
        from agent_harness.pipeline import checks
        from agent_harness.sessions import groups
        group = Path({str(tmp_path / "g")!r})
        said = []
        worker = threading.Thread(target=lambda: said.append(checks.run_checks(
            ["sleep 30"], Path({str(tmp_path)!r}), timeout_s=60, env={ENV!r},
            group_file=group)), daemon=True)
        worker.start()
        while not group.exists():
            time.sleep(0.01)
        os.killpg(int(__import__("json").loads(group.read_text())["pgid"]), signal.SIGTERM)
        time.sleep(0.1)  # the run's own handler comes a little later
        groups.stop_running()
        worker.join(2)
        print("blocked" if worker.is_alive() and not said else f"returned {{said}}")
        """
    )
    done = subprocess.run(
        [sys.executable, "-c", runner], capture_output=True, text=True, timeout=60
    )
    assert done.stdout.strip() == "blocked", done.stdout + done.stderr


# ------------------------------------------------------------------------------------- order


@pytest.mark.unit
def test_order_puts_measured_commands_cheapest_first() -> None:
    durations = {"pytest": 40.0, "ruff check .": 0.5, "mypy .": 12.0}
    assert order_checks(["pytest", "mypy .", "ruff check ."], durations) == [
        "ruff check .",
        "mypy .",
        "pytest",
    ]


@pytest.mark.unit
def test_order_leaves_unmeasured_commands_in_their_given_positions() -> None:
    commands = ["slow", "new-a", "mid", "new-b", "fast"]
    durations = {"slow": 9.0, "mid": 3.0, "fast": 1.0}
    assert order_checks(commands, durations) == ["fast", "new-a", "mid", "new-b", "slow"]


@pytest.mark.unit
def test_order_without_measurements_is_the_given_order() -> None:
    assert order_checks(["b", "a", "c"], {}) == ["b", "a", "c"]


@pytest.mark.unit
def test_order_keeps_ties_and_ignores_unusable_measurements() -> None:
    durations = {"a": 2.0, "b": 2.0, "c": 1.0, "d": float("nan"), "e": -1.0}
    assert order_checks(["d", "a", "b", "e", "c"], durations) == ["d", "c", "a", "e", "b"]


@pytest.mark.integration
def test_a_run_feeds_its_durations_to_the_next_ordering(tmp_path: Path) -> None:
    clock = iter([0.0, 5.0, 10.0, 10.5]).__next__
    run = run_checks(["echo slow", "echo quick"], tmp_path, timeout_s=10, env=ENV, clock=clock)
    assert run.durations() == {"echo slow": 5.0, "echo quick": 0.5}
    assert order_checks(["echo slow", "echo quick"], run.durations()) == [
        "echo quick",
        "echo slow",
    ]


# ------------------------------------------------------------------------------------- table


@pytest.mark.unit
def test_table_markdown_lists_command_result_and_seconds() -> None:
    run = CheckRun(
        (
            CheckResult("ruff check .", 0, 0.42, ""),
            CheckResult("pytest -q | tee log", 1, 12.3, "FAILED"),
            CheckResult("sleep 99", None, 60.0, "", timed_out=True),
            CheckResult("mypyy", None, 0.01, "", missing=True),
        ),
        skipped=("echo `date`",),
    )
    assert run.table_markdown().splitlines() == [
        "| command | result | seconds |",
        "| --- | --- | ---: |",
        "| `ruff check .` | passed | 0.4 |",
        "| `pytest -q \\| tee log` | failed (exit 1) | 12.3 |",
        "| `sleep 99` | timed out | 60.0 |",
        "| `mypyy` | program not found | 0.0 |",
        "| `` echo `date` `` | not run | – |",
    ]


@pytest.mark.unit
def test_an_empty_run_passes_and_has_no_failure() -> None:
    run = CheckRun(())
    assert run.passed and run.first_failure is None


@pytest.mark.unit
@pytest.mark.parametrize(
    ("result", "passed"),
    [
        (CheckResult("x", 0, 0.0, ""), True),
        (CheckResult("x", 1, 0.0, ""), False),
        (CheckResult("x", None, 0.0, "", timed_out=True), False),
        (CheckResult("x", None, 0.0, "", missing=True), False),
        (CheckResult("x", None, 0.0, ""), False),
    ],
)
def test_only_a_zero_exit_passes(result: CheckResult, passed: bool) -> None:
    assert result.passed is passed


@pytest.mark.unit
@pytest.mark.parametrize(
    ("command", "missing"),
    [
        ("no-such-tool -q", "no-such-tool"),
        ("LANG=C no-such-tool", "no-such-tool"),
        ("/nonexistent/bin/tool --x", "/nonexistent/bin/tool"),
        ("sh -c 'exit 0'", None),
        ("cd sub && make", None),  # the shell's own words cannot be looked up
        ("./scripts/check.sh", None),  # inside the repository: the agent may write it
        ("", None),
        ("echo 'unterminated", None),  # the shell will say what is wrong
    ],
)
def test_the_program_a_check_starts_is_looked_up_as_the_check_will_run_it(
    command: str, missing: str | None
) -> None:
    from agent_harness.pipeline.checks import missing_program

    assert missing_program(command, {"PATH": "/usr/bin:/bin"}) == missing
