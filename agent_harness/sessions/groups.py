"""A command run to its end as the leader of its own process group, by the run's checks and by
the direct-API executor's step checks alike.

Its output goes to a file the caller gives (never a pipe a background child could hold open), a
timeout ends the whole group (SIGTERM, then SIGKILL), and whatever the command left behind dies
with it when it ends. A run killed outright (SIGKILL, a lost machine) cannot end its commands:
under GNU `timeout`, where there is one, a command ends itself a little after its own limit,
and its group is written down (`group_file`), before the command may begin, so that the item's
next attempt ends it (`stop_leftover`) before it works in the same worktree. A run that is
stopping ends them all at once (`stop_running`).
"""

from __future__ import annotations

import contextlib
import functools
import json
import math
import os
import shutil
import signal
import subprocess
import threading
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import IO

from agent_harness.sessions.processes import group_alive, pid_alive, start_time

SHELL = "/bin/sh"
# Where an item's running check (of the run, or of an executor's step) is written down, in the
# item's own folder.
GROUP_FILE = "check.group"
# A command outlives a killed run by at most its limit plus this, under `timeout` (our own timer
# fires first while the run lives).
ORPHAN_MARGIN_S = 30.0
# Where a command's group is to be written down, the command's shell first waits on its stdin
# (a pipe) until the note is down: a run killed before then leaves no command it never noted.
# A run killed in that moment closes the pipe, and the command gives up unbegun. On the
# command's own line, in its own shell: no process more, and a syntax error still names line 1.
_GATE = "IFS= read -r _ah_go || exit 125; exec </dev/null; "

# The groups of the commands this process runs now, for `stop_running`; once it was called, a
# command's caller never goes on (`_NEVER`).
_RUNNING: set[int] = set()
_RUNNING_LOCK = threading.Lock()
_STOPPING = threading.Event()
_NEVER = threading.Event()


@dataclass(frozen=True)
class GroupEnd:
    """How a command ended: its exit code (negative: the signal that ended it; None when it
    timed out) and whether it timed out."""

    exit_code: int | None
    timed_out: bool


@functools.cache
def _gnu_timeout() -> str | None:
    """GNU coreutils' `timeout`, if it is the one on PATH (Busybox's takes no --kill-after);
    looked for once."""
    found = shutil.which("timeout")
    if found is None:
        return None
    try:
        said = subprocess.run([found, "--version"], capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.SubprocessError):
        return None
    return found if "GNU coreutils" in said.stdout else None


def run_in_group(
    command: str,
    cwd: Path,
    *,
    env: Mapping[str, str],
    timeout_s: float,
    output: IO[bytes],
    kill_grace_s: float = 2.0,
    group_file: Path | None = None,
) -> GroupEnd:
    """Run `command` under `/bin/sh -c` in `cwd` with exactly `env`, stdout and stderr into
    `output`, its group written to `group_file` while it runs. Raises OSError when it cannot
    start. Its whole group is gone when this returns."""
    argv = [SHELL, "-c", command if group_file is None else _GATE + command]
    wrapper = _gnu_timeout() if math.isfinite(timeout_s) else None
    if wrapper is not None:
        limit = timeout_s + kill_grace_s + ORPHAN_MARGIN_S
        argv = [wrapper, "--kill-after", "5", f"{limit:.3f}s", *argv]
    stdin: int = subprocess.DEVNULL
    gate: int | None = None
    if group_file is not None:
        stdin, gate = os.pipe()
    try:
        process = subprocess.Popen(
            argv,
            cwd=cwd,
            env=dict(env),
            stdin=stdin,
            stdout=output,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    except BaseException:  # OSError, or ValueError for a NUL in the command
        if gate is not None:
            os.close(gate)
        raise
    finally:
        if gate is not None:
            os.close(stdin)
    return _wait(process, timeout_s, kill_grace_s, group_file, gate)


def _wait(
    process: subprocess.Popen[bytes],
    timeout_s: float,
    kill_grace_s: float,
    group_file: Path | None,
    gate: int | None,
) -> GroupEnd:
    """Wait for a started command: its group written down first, where it is to be, and only
    then is the command let through its gate."""
    timed_out = False
    with _RUNNING_LOCK:
        _RUNNING.add(process.pid)
    try:
        if group_file is not None:
            _write_group(group_file, process.pid)
        if gate is not None and not _STOPPING.is_set():  # a stopping run begins nothing
            with contextlib.suppress(BrokenPipeError):  # a command killed meanwhile hears none
                os.write(gate, b"go\n")
        exit_code: int | None = process.wait(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        timed_out = True
        _signal_group(process.pid, signal.SIGTERM)
        with contextlib.suppress(subprocess.TimeoutExpired):
            process.wait(timeout=kill_grace_s)
        exit_code = None
    finally:
        if gate is not None:  # not opened, the command gives up unbegun when this closes
            os.close(gate)
        # Whatever the shell left behind (a hung child, a background job) dies with the
        # command, and so does a command whose run is stopping (an exception here).
        _signal_group(process.pid, signal.SIGKILL)
        process.wait()
        with _RUNNING_LOCK:
            _RUNNING.discard(process.pid)
        if group_file is not None:
            group_file.unlink(missing_ok=True)
    # A command that died of a signal it was not sent by us may have had it with the run
    # (systemd stops a whole unit with SIGTERM): give the run a moment to say it is stopping.
    signalled = exit_code is not None and (exit_code < 0 or exit_code > 128)
    if _STOPPING.wait(0.5 if signalled and not timed_out else 0):
        _NEVER.wait()  # the process is ending: a command it killed must not count as failed
    return GroupEnd(exit_code, timed_out)


def stop_running() -> int:
    """End every command this process is running, for a run that is stopping (an interrupt):
    a check is cheap to run again, and left running it would work on in the worktree. The
    threads running them never return (a killed check would read as a failed one), so call
    this only on the way out of the process. Returns how many were ended."""
    _STOPPING.set()
    with _RUNNING_LOCK:
        groups = sorted(_RUNNING)
    for pgid in groups:
        _signal_group(pgid, signal.SIGKILL)
    return len(groups)


def stop_leftover(group_file: Path) -> int | None:
    """End the group `group_file` names, left running by a run killed outright; returns its
    id, or None when there was none (or its id is now another process's). Then forgets it."""
    try:
        record = json.loads(group_file.read_text())
        pgid, start = int(record["pgid"]), record.get("start")
    except FileNotFoundError:
        return None
    except (OSError, ValueError, TypeError, KeyError):
        group_file.unlink(missing_ok=True)  # unreadable: nothing can be told from it
        return None
    # A leader gone leaves its id unused while any member lives, so only a live leader can be
    # a stranger that was given the same id since.
    now = start_time(pgid)
    # Without a start time to compare (no /proc), only a group whose leader is gone is ours
    # for sure: a live leader may be a stranger given the same id since.
    leader_alive = now is not None or pid_alive(pgid)
    stranger = leader_alive and (now is None or start is None or now != start)
    group_file.unlink(missing_ok=True)
    if stranger or not group_alive(pgid):
        return None
    _signal_group(pgid, signal.SIGKILL)
    return pgid


def _write_group(group_file: Path, pid: int) -> None:
    """Note a running command's group, written whole (a file half-written names no group)."""
    partial = group_file.with_name(group_file.name + ".partial")
    # Not knowing where to write it is no reason to fail the command: the note is a safety net.
    with contextlib.suppress(OSError):
        group_file.parent.mkdir(parents=True, exist_ok=True)
        partial.write_text(json.dumps({"pgid": pid, "start": start_time(pid)}))
        os.replace(partial, group_file)


def _signal_group(pgid: int, signum: signal.Signals) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):  # the group is gone already
        os.killpg(pgid, signum)
