"""A process id read earlier (a session's record, a pane's program) may name another process by
the time it is used: Linux hands ids out again once they come round (32768 by default, minutes
on a busy machine; a full test run goes round several times). Stopping a session must never
signal the group of whoever has the id now.

The stranger here is a real process in a group of its own, as an id's new owner would be; its
start time differs from the one noted for the session's program, as a new owner's would."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from agent_harness.sessions.headless import HeadlessHost
from agent_harness.sessions.processes import pid_alive, start_time
from agent_harness.sessions.tmux import PANE_END
from tests.shared.sessions import wait_for

pytestmark = pytest.mark.integration


@pytest.fixture
def stranger() -> Iterator[subprocess.Popen[bytes]]:
    """Somebody else's program, leading a process group of its own."""
    proc = subprocess.Popen(["sleep", "120"], start_new_session=True)
    try:
        yield proc
    finally:
        proc.kill()
        proc.wait()


def test_a_headless_session_whose_id_went_to_another_process_is_over_and_its_kill_spares_it(
    tmp_path: Path, stranger: subprocess.Popen[bytes]
) -> None:
    # A run died; its session's wrapper ended later; the id in its record went to a stranger.
    records = tmp_path / "sessions"
    records.mkdir()
    earlier = str(int(start_time(stranger.pid) or "1000") - 1)
    record = {"pid": stranger.pid, "start": earlier, "fifo": None, "started_at": 0.0}
    record |= {"log": str(tmp_path / "item-T1.log"), "exit": str(tmp_path / "item-T1.exit")}
    (records / "item-T1.json").write_text(json.dumps(record))
    host = HeadlessHost(tmp_path)  # the next run's host
    assert host.status("item-T1").alive is False  # not a session still at work
    host.kill("item-T1", grace_s=0.2)
    assert stranger.poll() is None  # was: SIGTERM, then SIGKILL, to the stranger's group
    assert not host.exists("item-T1")


def _copy_then_stop(pid: int, log: Path, noted_start: str | None) -> subprocess.Popen[bytes]:
    """The pane's copy as tmux runs it, for a pane whose program had id `pid`."""
    env = {"PATH": "/usr/bin:/bin"}
    if noted_start is not None:
        env["AH_PANE_START"] = noted_start
    script = f"p={pid}; looks=30; log={log}; {PANE_END}"
    return subprocess.Popen(["/bin/sh", "-c", script], stdin=subprocess.PIPE, env=env)


# A name may hold a newline (a process sets its own through /proc/self/comm): the first
# line of its stat then says nothing of when it started.
RENAMED = "open('/proc/self/comm', 'w').write('x\\ny'); import time; time.sleep(120)"


@pytest.mark.parametrize("named", ["plainly", "with-a-newline"])
def test_a_closed_pane_whose_program_id_went_to_another_process_spares_that_group(
    tmp_path: Path, stranger: subprocess.Popen[bytes], named: str
) -> None:
    # The pane's program ended long before its session was killed; its id is the stranger's now.
    if named == "with-a-newline":
        stranger.kill()
        stranger = subprocess.Popen([sys.executable, "-c", RENAMED], start_new_session=True)
        wait_for(lambda: "\n" in Path(f"/proc/{stranger.pid}/comm").read_text().rstrip("\n"))
    earlier = str(int(start_time(stranger.pid) or "1000") - 1)
    copy = _copy_then_stop(stranger.pid, tmp_path / "pane.log", earlier)
    assert copy.stdin is not None
    copy.stdin.write(b"the agent's last words\n")
    copy.stdin.close()  # tmux closed the pane
    assert copy.wait(timeout=30) == 1  # nothing it may stop
    try:
        assert stranger.poll() is None  # was: SIGTERM to the stranger's group
    finally:
        stranger.kill()
        stranger.wait()
    assert (tmp_path / "pane.log").read_text() == "the agent's last words\n"


def test_a_closed_pane_stops_its_own_programs_group_led_or_left_behind(tmp_path: Path) -> None:
    # The program itself still runs: its group is stopped.
    program = subprocess.Popen(["sleep", "120"], start_new_session=True)
    copy = _copy_then_stop(program.pid, tmp_path / "pane.log", None)
    assert copy.stdin is not None
    copy.stdin.close()
    copy.wait(timeout=30)
    assert program.wait(timeout=10) == -15
    # The program is gone and what it started runs on in its group (the id stays taken).
    leader = subprocess.Popen(
        ["/bin/sh", "-c", "sleep 120 & echo $!"], start_new_session=True, stdout=subprocess.PIPE
    )
    assert leader.stdout is not None
    left = int(leader.stdout.readline())
    leader.wait()
    copy = _copy_then_stop(leader.pid, tmp_path / "pane.log", "1")
    assert copy.stdin is not None
    copy.stdin.close()
    copy.wait(timeout=30)
    wait_for(lambda: not pid_alive(left))  # ended with its group
