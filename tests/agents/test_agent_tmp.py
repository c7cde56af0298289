"""Each agent run gets a temporary folder of its own, removed when its session is closed.

Real agent CLIs leave files in the temporary folder every time they start (Claude Code unpacks
a 5.5 MB native library there; others keep sockets and probes). A fleet that runs for a week
starts thousands of them: in the machine's /tmp that fills the disk, and one agent can read
what another left there.
"""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from agent_harness.agents.presets import PRESETS
from agent_harness.agents.runner import AgentState, SessionRun, run_cli_agent
from agent_harness.agents.setup import remove_own_tmp
from agent_harness.sessions.protocol import SessionHost, SessionHostFailed, SessionStatus
from tests.shared.sessions import base_env, wait_for

# Writes where a program's temporary files go (Python reads TMPDIR, as Node, Bun and Rust do),
# leaves a file there, and notes both in the worktree.
LITTERER = """\
import json, os, subprocess, sys, tempfile
where = tempfile.gettempdir()
with open(os.path.join(where, "native-module.so"), "wb") as out:
    out.write(b"x" * 4096)
# What a test that forgets `git init` in its temporary folder would reach.
found = subprocess.run(["git", "rev-parse", "--show-toplevel"], cwd=where,
                       capture_output=True, text=True).stdout.strip()
with open("seen.json", "w") as out:
    json.dump({"TMPDIR": os.environ.get("TMPDIR"), "gettempdir": where,
               "left": os.listdir(where), "repository": found}, out)
print("done")
"""


def run_script(
    host: SessionHost, work: Path, state_dir: Path, session: str, machine_tmp: Path, code: str
) -> SessionRun:
    """Run the Python `code` as an agent in `work`, with `machine_tmp` as the machine's TMPDIR."""
    script = work.parent / f"{session}.py"
    script.write_text(code)
    preset = dataclasses.replace(
        PRESETS["claude"], binary=sys.executable, template=(sys.executable, str(script))
    )
    machine_tmp.mkdir(exist_ok=True)
    return run_cli_agent(
        host,
        preset,
        session=session,
        workdir=work,
        prompt="Fix the bug.",
        state_dir=state_dir,
        home=state_dir / "agent-home",
        env_source={**base_env(), "TMPDIR": str(machine_tmp)},
        timeout_s=60,
        idle_s=30,
        poll_s=0.02,
    )


def run_litterer(
    host: SessionHost, work: Path, state_dir: Path, session: str, machine_tmp: Path
) -> dict[str, Any]:
    """Run the litterer as an agent with `machine_tmp` as the machine's TMPDIR; what it saw."""
    ran = run_script(host, work, state_dir, session, machine_tmp, LITTERER)
    assert ran.outcome.state is AgentState.DONE, ran.outcome.reason
    seen: dict[str, Any] = json.loads((work / "seen.json").read_text())
    return seen


def test_an_agents_temporary_files_go_to_its_own_folder_and_leave_with_its_session(
    local_host: SessionHost, name: str, work: Path, state_dir: Path, tmp_path: Path
) -> None:
    system_tmp = tmp_path / "system-tmp"
    seen = run_litterer(local_host, work, state_dir, name, system_tmp)
    own = Path(seen["TMPDIR"])
    assert seen["gettempdir"] == seen["TMPDIR"]
    # A private folder inside the machine's, never the shared folder itself.
    assert own.parent == system_tmp / f"agent-harness-{os.getuid()}"
    assert own.parent.stat().st_mode & 0o777 == 0o700  # the user's alone
    assert seen["left"] == ["native-module.so"]  # it could write there, and found it empty
    assert not own.exists()  # gone with the session
    assert [p.name for p in system_tmp.iterdir()] == [own.parent.name]
    assert list(own.parent.iterdir()) == []  # nothing left in the machine's folder


def test_the_temporary_folder_is_short_and_outside_the_users_clone(
    local_host: SessionHost, work: Path, tmp_path: Path
) -> None:
    # The state folder is often inside the user's own clone (`.agent-harness`), with a long
    # path and a long session name. A Unix socket's path may hold 107 bytes, and agents make
    # theirs in TMPDIR; and git run in a temporary folder must not find the user's clone.
    clone = tmp_path / ("a-project-with-a-rather-long-name-" * 3)
    clone.mkdir()
    subprocess.run(["git", "init", "-q", str(clone)], check=True)
    state_dir = clone / ".agent-harness" / "items" / "PLAN--T12"
    session = "agent-harness-" + "a-very-long-plan-name-" * 4 + "T12-attempt-3"
    machine_tmp = tmp_path / "machine-tmp"
    seen = run_litterer(local_host, work, state_dir, session, machine_tmp)
    assert len(seen["TMPDIR"]) - len(str(machine_tmp)) <= 32
    assert seen["repository"] == ""  # not inside the user's clone


def test_a_shared_folder_another_could_have_made_is_not_used(
    local_host: SessionHost, work: Path, tmp_path: Path, state_dir: Path
) -> None:
    # `agent-harness-<uid>` in a folder every user may write could be made first by another,
    # as a link or open to all: the agent's files then go under the state folder instead.
    machine_tmp = tmp_path / "machine-tmp"
    elsewhere = tmp_path / "theirs"
    elsewhere.mkdir()
    machine_tmp.mkdir()
    (machine_tmp / f"agent-harness-{os.getuid()}").symlink_to(elsewhere)
    own = Path(run_litterer(local_host, work, state_dir, "t", machine_tmp)["TMPDIR"])
    assert own.is_relative_to(state_dir) and list(elsewhere.iterdir()) == []


class FailsOnceItsAgentEnded:
    """A real host whose own commands fail once the agent has ended and its session is gone
    (as tmux does when its server went away): the watch raises."""

    def __init__(self, host: SessionHost) -> None:
        self.host = host

    def __getattr__(self, name: str) -> Any:
        return getattr(self.host, name)

    def status(self, name: str) -> SessionStatus:
        found = self.host.status(name)
        if not found.alive:
            self.host.kill(name)
            raise SessionHostFailed(self.host.kind, "no server running")
        return found


def test_a_watch_that_fails_after_its_session_went_leaves_no_folder(
    local_host: SessionHost, work: Path, tmp_path: Path, state_dir: Path
) -> None:
    machine_tmp = tmp_path / "machine-tmp"
    with pytest.raises(SessionHostFailed):
        run_litterer(FailsOnceItsAgentEnded(local_host), work, state_dir, "t", machine_tmp)  # type: ignore[arg-type]
    assert (work / "seen.json").exists()  # the agent ran and wrote into its folder
    assert list((machine_tmp / f"agent-harness-{os.getuid()}").iterdir()) == []


# A program of the agent's still writing there as its folder is removed (tmux's Python
# wrapper stops its agent after the session is killed), until it stops for good.
WRITER = """\
import os, sys, time
folder, end = sys.argv[1], time.time() + 0.2
open(os.path.join(folder, "started"), "w").close()
n = 0
while time.time() < end:
    try:
        open(os.path.join(folder, f"f{n}"), "w").close()
    except FileNotFoundError:
        time.sleep(0.001)
    n += 1
"""


@pytest.mark.integration
def test_a_folder_still_being_written_to_as_it_is_removed_is_removed_all_the_same(
    tmp_path: Path,
) -> None:
    folder = tmp_path / "agent-tmp"
    folder.mkdir()
    writer = subprocess.Popen([sys.executable, "-c", WRITER, str(folder)])
    try:
        wait_for(lambda: (folder / "started").exists())
        remove_own_tmp(folder)
    finally:
        writer.wait(timeout=30)
    assert not folder.exists()  # was: a file made after the listing kept the folder for good


# Leaves a daemon behind: a double fork with a session of its own (out of every process group
# the harness ends), deaf to SIGHUP and SIGTERM, writing its pid where the test can read it.
DAEMON = """\
import os, signal, sys, time
pid_file = os.path.abspath("daemon.pid")
if os.fork() == 0:
    os.setsid()
    if os.fork() == 0:
        signal.signal(signal.SIGHUP, signal.SIG_IGN)
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        with open(pid_file + ".tmp", "w") as out:
            out.write(str(os.getpid()))
        os.rename(pid_file + ".tmp", pid_file)
        while True:
            time.sleep(0.2)
    os._exit(0)
while not os.path.exists(pid_file):
    time.sleep(0.01)
print("done")
"""


def _alive(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"  # a zombie has ended


def test_a_daemon_an_agent_left_behind_is_ended_with_its_session(
    local_host: SessionHost, name: str, work: Path, state_dir: Path, tmp_path: Path
) -> None:
    # One lived on for five more runs, writing into the person's clone.
    ran = run_script(local_host, work, state_dir, name, tmp_path / "system-tmp", DAEMON)
    pid = int((work / "daemon.pid").read_text())
    try:
        assert ran.outcome.state is AgentState.DONE, ran.outcome.reason
        wait_for(lambda: not _alive(pid))
    finally:
        if _alive(pid):
            os.kill(pid, 9)


@pytest.mark.acceptance
def test_an_agent_whose_tmux_server_was_killed_is_said_so_not_blamed(
    work: Path, state_dir: Path, tmp_path: Path
) -> None:
    # Another agent's `tmux kill-server` read as this one crashing: "exited with status 143".
    import shutil
    import threading

    from agent_harness.sessions.tmux import TmuxHost

    if shutil.which("tmux") is None:
        pytest.skip("tmux is not on PATH (install tmux; .ci/run does)")
    host = TmuxHost(socket_name=f"ah-test-killed-{os.getpid()}")
    slow = "import time\nprint('working', flush=True)\ntime.sleep(60)\n"
    ended: list[SessionRun] = []

    def run() -> None:
        ended.append(run_script(host, work, state_dir, "killed", tmp_path / "system-tmp", slow))

    worker = threading.Thread(target=run, daemon=True)
    worker.start()
    try:
        wait_for(lambda: host.exists("killed") and "working" in host.output("killed"))
        host._run("kill-server", check=False)  # what the other agent ran
        worker.join(30)
    finally:
        host.kill_server()
    [ran] = ended
    assert ran.outcome.state is AgentState.CRASHED
    assert "the tmux server stopped under it" in ran.outcome.reason, ran.outcome.reason
