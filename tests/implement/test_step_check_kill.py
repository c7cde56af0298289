"""A run killed outright (`kill -9`) while the direct-API executor runs a step check leaves
nothing working in the worktree for long: the check ends itself a little past its limit (under
GNU `timeout`), and the item's next attempt ends it at once from the group it wrote down."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from agent_harness.sessions import groups
from agent_harness.sessions.groups import stop_leftover
from agent_harness.sessions.processes import group_alive, same_process

pytestmark = pytest.mark.integration

ENV = {"PATH": "/usr/bin:/bin"}


def test_a_step_check_left_by_a_killed_run_is_bounded_and_ended_by_the_next_attempt(
    tmp_path: Path,
) -> None:
    group = tmp_path / "item" / "check.group"
    runner = textwrap.dedent(
        f"""
        from pathlib import Path
        from agent_harness.implement.steps import Check
        from agent_harness.implement.verifier import verify
        verify(Check(kind="command", command="sleep 30; echo late > late"),
               Path({str(tmp_path)!r}), env={ENV!r}, timeout_s=60,
               group_file=Path({str(group)!r}))
        """
    )
    run = subprocess.Popen([sys.executable, "-c", runner], stderr=subprocess.PIPE)
    for _ in range(1000):  # at most 10 s
        if group.exists() or run.poll() is not None:
            break
        time.sleep(0.01)
    run.kill()
    _, err = run.communicate(timeout=10)
    assert group.exists(), err.decode()
    record = json.loads(group.read_text())
    pgid, noted = int(record["pgid"]), record.get("start")
    try:
        assert group_alive(pgid)  # nothing of the run is left to end it...
        # ...but, where GNU timeout is, it leads the group, set to end it 30 s past its own
        # limit at the most (without it, only the next attempt below ends the check).
        leader = Path(f"/proc/{pgid}/cmdline").read_bytes().split(b"\0")
        if groups._gnu_timeout() is not None:
            assert Path(leader[0].decode()).name == "timeout", leader
            assert leader[3] == b"92.000s"  # 60 s, 2 s of grace, 30 s of margin
        else:
            assert leader[0] == b"/bin/sh", leader
        # The next attempt reads the note and ends the whole group before it works there.
        assert stop_leftover(group) == pgid
        for _ in range(500):
            if not group_alive(pgid):
                break
            time.sleep(0.01)
        assert not group_alive(pgid) and not group.exists()
    finally:
        # Never `kill -KILL -PGID` by the kill program: procps-ng's (4.0) reads `-10808` as
        # options and sends SIGKILL to pid -1, every process the user may signal (as root, the
        # whole machine: it ended CI twice).
        # Only a group still alive and still led by the check (or by nobody): its id may have
        # gone to another process since.
        if pgid > 1 and group_alive(pgid) and same_process(pgid, noted):
            with contextlib.suppress(ProcessLookupError):
                os.killpg(pgid, signal.SIGKILL)
    assert not (tmp_path / "late").exists()
