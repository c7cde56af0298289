"""What this machine says of a process or a process group: alive, ended, when it started.

Read from signals and, on Linux, `/proc/<pid>/stat`: an ended process nobody has reaped yet (a
zombie, under an init that does not reap, as in some containers) still answers signals, and is
told apart there by its state.
"""

from __future__ import annotations

import os


def stat_fields(pid: int) -> list[str] | None:
    """The fields of `/proc/<pid>/stat` after the command's name (state, ppid, pgrp, ...; the
    name may hold spaces and parentheses, so it is cut at its last `)`); None without them."""
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii", errors="replace") as fh:
            return fh.read().rpartition(")")[2].split()
    except OSError:
        return None


def pid_alive(pid: int, start: str | None = None) -> bool:
    """Whether process `pid` runs (a zombie does not; one we may not signal counts as alive);
    with `start`, only while the id still names the process that started then (as
    `same_process`, from the same read of /proc)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    fields = stat_fields(pid)
    if fields is None:
        return True
    if start is not None and len(fields) > 19 and fields[19] != start:
        return False
    return fields[:1] != ["Z"]


def group_alive(pgid: int) -> bool:
    """Whether a process of group `pgid` still runs (zombies told apart; a group we may not
    signal is not ours, so not alive here)."""
    try:
        os.killpg(pgid, 0)
    except (ProcessLookupError, PermissionError):
        return False
    try:
        pids = [entry for entry in os.listdir("/proc") if entry.isdigit()]
    except OSError:
        return True  # no /proc to ask: it answered, so it counts as alive
    for pid in pids:
        fields = stat_fields(int(pid))
        # After the name: state, ppid, pgrp.
        if fields and len(fields) > 2 and fields[2] == str(pgid) and fields[0] not in ("Z", "X"):
            return True
    return False


def start_time(pid: int) -> str | None:
    """When process `pid` started, in the kernel's ticks since boot (Linux), to tell it from a
    later process given the same id; None when that cannot be read."""
    fields = stat_fields(pid)
    return fields[19] if fields is not None and len(fields) > 19 else None


def same_process(pid: int, start: str | None) -> bool:
    """Whether `pid` still names the process that started at `start` (as `start_time` read it
    then), or cannot be told from it (no start noted, no /proc): False once the id was given
    to another process. Before signalling a group by an id read earlier (a record, another
    run's note): ids come round again within minutes on a busy machine (Linux's default
    pid_max is 32768), and a stranger's group given the id would get the signal."""
    if start is None:
        return True
    now = start_time(pid)
    return now is None or now == start
