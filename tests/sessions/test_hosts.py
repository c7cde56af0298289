"""One suite every session host passes: tmux, headless, and remote over loopback HTTP."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from agent_harness.sessions import headless, tmux, wrapper
from agent_harness.sessions.default import default_host
from agent_harness.sessions.headless import HeadlessHost
from agent_harness.sessions.processes import group_alive
from agent_harness.sessions.protocol import (
    SessionExists,
    SessionHost,
    SessionHostFailed,
    SessionNotFound,
    SessionNotRunning,
    SessionSpec,
    SessionStatus,
    safe_session_name,
)
from agent_harness.sessions.remote import RemoteSessionHost
from agent_harness.sessions.tmux import TmuxHost
from agent_harness.sessions.wrapper import END_MARK, read_log, recorded_exit
from agent_harness.testing.agents import write_scripted_agent
from agent_harness.testing.clock import FakeClock
from agent_harness.testing.session_server import running_session_server
from tests.shared.sessions import TOKEN, base_env, logged_tmux, wait_for


def spec_for(
    name: str,
    argv: list[str],
    work: Path,
    log_dir: Path,
    env: dict[str, str] | None = None,
    stdin_devnull: bool = False,
) -> SessionSpec:
    return SessionSpec(
        name=name,
        command=argv,
        cwd=work,
        env=env if env is not None else base_env(),
        log_path=log_dir / f"{safe_session_name(name)}.log",
        stdin_devnull=stdin_devnull,
    )


def ended(host: SessionHost, name: str) -> bool:
    return not host.status(name).alive


def test_a_finished_program_leaves_its_exit_code_output_and_screen(
    host: SessionHost, name: str, work: Path, agents_dir: Path, tmp_path: Path
) -> None:
    argv = write_scripted_agent(agents_dir, {"steps": [{"print": ["one", "two"]}], "exit": 7})
    host.start(spec_for(name, argv, work, tmp_path / "logs"))
    assert host.exists(name)
    wait_for(lambda: ended(host, name))

    assert host.status(name).exit_code == 7
    assert host.output(name).replace("\r\n", "\n") == "one\ntwo\n"
    assert host.screen(name).splitlines()[-2:] == ["one", "two"]
    assert host.screen(name, lines=1) == "two"


def test_a_log_under_a_path_with_percent_and_hash_signs_holds_the_output(
    host: SessionHost, name: str, work: Path, agents_dir: Path, tmp_path: Path
) -> None:
    # tmux reads the copy's command as a format and a strftime text: `%d` became the day, the
    # copy wrote elsewhere and failed, and its end stopped the agent (status 143, empty log).
    argv = write_scripted_agent(agents_dir, {"steps": [{"print": ["one"]}], "exit": 0})
    host.start(spec_for(name, argv, work, tmp_path / "report-100%done %d #{x} #1"))
    wait_for(lambda: ended(host, name))
    assert host.status(name).exit_code == 0
    assert host.output(name).replace("\r\n", "\n") == "one\n"


def test_a_successful_program_exits_zero_and_its_work_is_on_disk(
    host: SessionHost, name: str, work: Path, agents_dir: Path, tmp_path: Path
) -> None:
    host.start(spec_for(name, write_scripted_agent(agents_dir, "done"), work, tmp_path / "logs"))
    wait_for(lambda: ended(host, name))
    assert host.status(name).exit_code == 0
    assert (work / "DONE.txt").read_text() == "done\n"


def test_a_live_session_cannot_be_started_twice(
    host: SessionHost, name: str, work: Path, agents_dir: Path, tmp_path: Path
) -> None:
    spec = spec_for(name, write_scripted_agent(agents_dir, "hang"), work, tmp_path / "logs")
    host.start(spec)
    with pytest.raises(SessionExists):
        host.start(spec)
    assert host.status(name).alive
    host.kill(name)


def test_a_refused_start_leaves_the_live_sessions_log_where_it_is(
    host: SessionHost, name: str, work: Path, agents_dir: Path, tmp_path: Path
) -> None:
    host.start(spec_for(name, write_scripted_agent(agents_dir, "ask"), work, tmp_path / "logs"))
    wait_for(lambda: host.screen(name).rstrip().endswith("[y/N]"))
    again = spec_for(name, write_scripted_agent(agents_dir, "done"), work, tmp_path / "logs")
    with pytest.raises(SessionExists):
        host.start(again)
    # Its log was not moved aside for a run that never started: it still reads the question,
    # and the answer lands in it too.
    assert not [p for p in (tmp_path / "logs").iterdir() if p.name.endswith(".1.log")]
    host.send_keys(name, "still mine")
    wait_for(lambda: ended(host, name))
    assert "answer: still mine" in host.output(name)


def test_an_ended_session_can_be_started_again_with_a_fresh_log_and_the_old_one_kept(
    host: SessionHost, name: str, work: Path, agents_dir: Path, tmp_path: Path
) -> None:
    first = write_scripted_agent(agents_dir, {"steps": [{"print": "first run"}], "exit": 1})
    second = write_scripted_agent(agents_dir, {"steps": [{"print": "second run"}], "exit": 0})
    host.start(spec_for(name, first, work, tmp_path / "logs"))
    wait_for(lambda: ended(host, name))
    host.start(spec_for(name, second, work, tmp_path / "logs"))
    wait_for(lambda: ended(host, name))
    assert host.status(name).exit_code == 0
    assert "first run" not in host.output(name)
    assert "second run" in host.output(name)
    # The first run's log is kept beside the new one, never written over.
    [kept] = [p for p in (tmp_path / "logs").iterdir() if p.name.endswith(".1.log")]
    assert "first run" in kept.read_text() and "second run" not in kept.read_text()


def test_send_keys_answers_a_question(
    host: SessionHost, name: str, work: Path, agents_dir: Path, tmp_path: Path
) -> None:
    host.start(spec_for(name, write_scripted_agent(agents_dir, "ask"), work, tmp_path / "logs"))
    wait_for(lambda: host.screen(name).rstrip().endswith("[y/N]"))
    assert host.status(name).alive

    host.send_keys(name, "yes please")
    wait_for(lambda: ended(host, name))
    assert host.status(name).exit_code == 0
    assert (work / "answer.txt").read_text() == "yes please"
    assert "answer: yes please" in host.output(name)


def test_stdin_devnull_gives_the_program_end_of_input(
    host: SessionHost, name: str, work: Path, agents_dir: Path, tmp_path: Path
) -> None:
    argv = write_scripted_agent(agents_dir, "ask")
    host.start(spec_for(name, argv, work, tmp_path / "logs", stdin_devnull=True))
    wait_for(lambda: ended(host, name))
    assert host.status(name).exit_code == 0
    assert (work / "answer.txt").read_text() == ""


def test_send_keys_to_an_ended_session_is_refused(
    host: SessionHost, name: str, work: Path, agents_dir: Path, tmp_path: Path
) -> None:
    host.start(spec_for(name, write_scripted_agent(agents_dir, "done"), work, tmp_path / "logs"))
    wait_for(lambda: ended(host, name))
    with pytest.raises(SessionNotRunning):
        host.send_keys(name, "too late")


def test_kill_stops_the_program_and_is_idempotent(
    host: SessionHost, name: str, work: Path, agents_dir: Path, tmp_path: Path
) -> None:
    argv = write_scripted_agent(
        agents_dir, {"steps": [{"print": "started"}, {"hang": None}, {"write_file": {"path": "x"}}]}
    )
    host.start(spec_for(name, argv, work, tmp_path / "logs"))
    wait_for(lambda: "started" in host.output(name))
    host.kill(name)
    host.kill(name)
    assert not host.status(name).alive
    assert not host.exists(name)
    assert not (work / "x").exists()
    host.kill("never-existed")


def _pid_alive(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rpartition(")")[2].split()[:1] != ["Z"]


def test_kill_also_ends_what_the_program_started(
    host: SessionHost, name: str, work: Path, tmp_path: Path
) -> None:
    # An agent that left a process of its own running (a tool, a server) and then hung: killing
    # the session must take that process too, or every timed-out agent leaves one behind.
    pid_file = tmp_path / "child.pid"
    write_pid = f"open({str(pid_file)!r}, 'w').write(str(os.getpid()))"
    child = f"import os, time; {write_pid}; time.sleep(600)"
    agent = (
        f"import subprocess, sys, time; subprocess.Popen([sys.executable, '-c', {child!r}]); "
        "print('started', flush=True); time.sleep(600)"
    )
    host.start(spec_for(name, [sys.executable, "-c", agent], work, tmp_path / "logs"))
    wait_for(lambda: "started" in host.output(name) and pid_file.exists() and pid_file.read_text())
    pid = int(pid_file.read_text())
    host.kill(name)
    wait_for(lambda: not _pid_alive(pid))


def test_unknown_sessions_are_reported_as_such(host: SessionHost, name: str) -> None:
    assert not host.exists(name)
    assert host.status(name).alive is False
    assert host.status(name).exit_code is None
    with pytest.raises(SessionNotFound):
        host.output(name)


def test_the_session_sees_exactly_the_environment_it_was_given(
    host: SessionHost, name: str, work: Path, agents_dir: Path, tmp_path: Path
) -> None:
    argv = write_scripted_agent(agents_dir, {"steps": [{"env_dump": "env.json"}]})
    env = {**base_env(), "ONLY_THIS": "1"}
    host.start(spec_for(name, argv, work, tmp_path / "logs", env=env))
    wait_for(lambda: ended(host, name))
    seen = json.loads((work / "env.json").read_text())
    # Python may set LC_CTYPE itself (PEP 538); nothing else may appear, tmux's TMUX included.
    seen.pop("LC_CTYPE", None)
    assert seen == env


def test_names_are_sanitised_the_same_way_everywhere(
    host: SessionHost, work: Path, agents_dir: Path, tmp_path: Path
) -> None:
    raw = "ah-octo/app T3:x"
    spec = spec_for(raw, write_scripted_agent(agents_dir, "done"), work, tmp_path / "logs")
    assert spec.name == "ah-octo-app-T3-x"
    host.start(spec)
    wait_for(lambda: ended(host, raw))
    assert host.status("ah-octo-app-T3-x").exit_code == 0
    host.kill(raw)


def test_a_missing_program_ends_with_status_127(
    host: SessionHost, name: str, work: Path, tmp_path: Path
) -> None:
    host.start(spec_for(name, ["no-such-agent-binary-xyz"], work, tmp_path / "logs"))
    wait_for(lambda: ended(host, name))
    assert host.status(name).exit_code == 127
    assert "no-such-agent-binary-xyz" in host.output(name)


# ---------------------------------------------------------------------------------------------
# What differs per host


@pytest.mark.acceptance
def test_tmux_attach_command_names_the_private_socket(tmux_host: TmuxHost) -> None:
    assert tmux_host.attach_command("ah-x") == [
        "tmux",
        "-L",
        tmux_host.socket_name,
        "attach",
        "-t",
        "ah-x",
    ]


@pytest.mark.acceptance
def test_a_read_only_attach_sends_the_agent_no_key_and_a_plain_one_does(
    tmux_host: TmuxHost, name: str, work: Path, tmp_path: Path
) -> None:
    # Ctrl-C typed in `attach` reached the agent, which failed its item: `--read-only` watches.
    answer = tmp_path / "answer.txt"
    done = f"{answer}.tmp"  # written whole, then named: never read half-written
    reads = (
        f"import os, sys; line = sys.stdin.readline(); "
        f"open({done!r}, 'w').write(line); os.replace({done!r}, {str(answer)!r})"
    )
    tmux_host.start(spec_for(name, [sys.executable, "-c", reads], work, tmp_path))
    outer = TmuxHost(socket_name=f"{tmux_host.socket_name}-outer")
    env = {**base_env(), "TERM": "xterm"}
    try:
        for attach, typed in ((True, "from the watcher"), (False, "from the person")):
            viewer = f"viewer-{int(attach)}"
            command = tmux_host.attach_command(name, read_only=attach)
            outer.start(spec_for(viewer, command, work, tmp_path, env=env))
            wait_for(lambda: _attached(tmux_host))
            if attach:  # then detached before the person types: only their line can arrive
                outer._run("send-keys", "-t", viewer, typed, "Enter")
                outer.kill(viewer)
                wait_for(lambda: not _attached(tmux_host))
                continue

            def typed_and_read(viewer: str = viewer, typed: str = typed) -> bool:
                # Typed again until read: keys sent while a loaded machine still sets up the
                # attaching client can be lost on the way (the watcher's line is sent once).
                outer._run("send-keys", "-t", viewer, typed, "Enter")
                return answer.exists() or _arrived(answer)

            wait_for(typed_and_read, timeout=20)
        assert answer.read_text() == "from the person\n"
    finally:
        outer.kill_server()


def _arrived(answer: Path, wait_s: float = 0.5) -> bool:
    """Whether `answer` appears within `wait_s`."""
    deadline = time.monotonic() + wait_s
    while time.monotonic() < deadline:
        if answer.exists():
            return True
        time.sleep(0.02)
    return False


def _attached(host: TmuxHost) -> bool:
    """Whether any terminal is attached to the host's sessions now."""
    return bool(host._run("list-clients", check=False).stdout.strip())


@pytest.mark.acceptance
def test_tmux_keeps_the_final_screen_after_the_program_ends(
    tmux_host: TmuxHost, name: str, work: Path, agents_dir: Path, tmp_path: Path
) -> None:
    argv = write_scripted_agent(agents_dir, {"steps": [{"print": "last words"}], "exit": 2})
    tmux_host.start(spec_for(name, argv, work, tmp_path / "logs"))
    wait_for(lambda: ended(tmux_host, name))
    assert tmux_host.exists(name)  # remain-on-exit: a person can still look at it
    assert tmux_host.screen(name).splitlines()[-1] == "last words"
    assert tmux_host.status(name).exit_code == 2


@pytest.mark.acceptance
def test_tmux_sees_a_wrapper_that_died_without_a_word_once_its_pane_is_asked_again(
    tmux_socket: str, clock: FakeClock, name: str, work: Path, tmp_path: Path
) -> None:
    # While the wrapper has written no exit status, tmux is asked at most every PANE_CHECK_S.
    host = TmuxHost(socket_name=tmux_socket, clock=clock)
    try:
        host.start(spec_for(name, ["sh", "-c", "echo started; sleep 30"], work, tmp_path / "logs"))
        wait_for(lambda: "started" in host.output(name))
        panes = host._run("list-panes", "-t", f"={name}:", "-F", "#{pane_pid}")
        os.kill(int(panes.stdout.split()[0]), signal.SIGKILL)  # the wrapper, with no exit file
        wait_for(
            lambda: "1" in host._run("list-panes", "-t", f"={name}:", "-F", "#{pane_dead}").stdout
        )
        assert host.status(name).alive  # not asked again yet
        clock.advance(TmuxHost.PANE_CHECK_S)
        # Ended, with the signal's code once tmux has it (a loaded tmux may never say).
        wait_for(lambda: not host.status(name).alive)
        assert host.status(name).exit_code in (128 + signal.SIGKILL, None)
    finally:
        host.kill(name)


@pytest.mark.acceptance
def test_tmux_hands_on_an_environment_no_shell_could_export(
    tmux_host: TmuxHost, name: str, work: Path, agents_dir: Path, tmp_path: Path
) -> None:
    # A name that is no shell name cannot be exported by the shell wrapper; the session still
    # gets exactly its environment (through the Python one), and its output is logged.
    argv = write_scripted_agent(agents_dir, {"steps": [{"env_dump": "env.json"}, {"print": "hi"}]})
    env = {**base_env(), "odd-name.x": "1"}
    tmux_host.start(spec_for(name, argv, work, tmp_path / "logs", env=env))
    wait_for(lambda: ended(tmux_host, name))
    seen = json.loads((work / "env.json").read_text())
    seen.pop("LC_CTYPE", None)
    assert seen == env
    assert "hi" in tmux_host.output(name)
    assert tmux_host.status(name).exit_code == 0


def wait_for_dead_pane(host: TmuxHost, name: str, clock: FakeClock) -> None:
    """Until tmux says the pane's program ended, and past the host's wait before asking it."""
    wait_for(lambda: "1" in host._run("list-panes", "-t", f"={name}:", "-F", "#{pane_dead}").stdout)
    clock.advance(TmuxHost.PANE_CHECK_S)


def settle_time_passes(host: TmuxHost, name: str, clock: FakeClock) -> None:
    """LOG_SETTLE_S passes on the host's clock since it first saw the exit recorded."""
    assert host.status(name).alive  # seen: the wait starts
    clock.advance(wrapper.LOG_SETTLE_S)


@pytest.mark.acceptance
def test_tmux_waits_for_the_log_even_after_the_pane_is_dead(
    tmux_socket: str, clock: FakeClock, name: str, work: Path, tmp_path: Path
) -> None:
    # A dead pane means tmux has read the terminal, not that its copy has reached the log: the
    # end is told only once the end mark is in the log, or LOG_SETTLE_S after the exit was
    # recorded (a copy that lost it). Here the copy is cut before the agent ends.
    host = TmuxHost(socket_name=tmux_socket, clock=clock)
    log = tmp_path / "logs" / f"{name}.log"
    said = log.with_name(log.name + ".said")
    try:
        host.start(spec_for(name, ["sh", "-c", "echo started; sleep 30"], work, log.parent))
        wait_for(lambda: "started" in host.output(name))
        host._run("pipe-pane", "-t", f"={name}:")  # the copy ends, and stops the agent
        wait_for(said.exists)
        wait_for_dead_pane(host, name, clock)
        assert host.status(name) == SessionStatus(True, None)  # its last words may be on the way
        settle_time_passes(host, name, clock)
        assert host.status(name) == SessionStatus(False, 128 + signal.SIGTERM)
        assert END_MARK not in log.read_bytes()
    finally:
        host.kill(name)


@pytest.mark.acceptance
def test_tmux_an_exit_the_wrapper_could_not_record_is_the_panes_and_ends_the_wait(
    tmux_socket: str, clock: FakeClock, name: str, work: Path, tmp_path: Path
) -> None:
    # The file for the exit code cannot be written (here a directory stands in its way; a full
    # disk does the same): the session is still seen to end, within LOG_SETTLE_S, and with the
    # agent's own code, which the pane's exit status carries (tmux under load may not have it).
    host = TmuxHost(socket_name=tmux_socket, clock=clock)
    log = tmp_path / "logs" / f"{name}.log"
    said = log.with_name(log.name + ".said")
    try:
        host.start(spec_for(name, ["sh", "-c", f"mkdir '{said}'; exit 3"], work, log.parent))
        wait_for(lambda: said.is_dir())
        wait_for_dead_pane(host, name, clock)
        assert host.status(name).alive  # for now, its last words could still be on the way
        settle_time_passes(host, name, clock)
        wait_for(lambda: not host.status(name).alive)  # tmux may not have the status yet
        # The agent's code, not the script's last command's (0): when tmux has it at all.
        assert host.status(name) in (SessionStatus(False, 3), SessionStatus(False, None))
    finally:
        host.kill(name)


@pytest.mark.acceptance
def test_tmux_log_holds_all_the_output_the_moment_the_session_is_seen_to_end(
    tmux_host: TmuxHost, work: Path, tmp_path: Path
) -> None:
    # tmux copies the terminal into the log on its own time; an end seen before the last
    # bytes arrived would lose the agent's final report (its usage, its error).
    logs = tmp_path / "logs"
    program = "i=0; while [ $i -lt 400 ]; do echo line $i of output; i=$((i+1)); done; printf END"
    for n in range(5):
        name = f"settle-{n}"
        tmux_host.start(spec_for(name, ["sh", "-c", program], work, logs))
        wait_for(lambda name=name: ended(tmux_host, name))
        output = tmux_host.output(name)
        assert output.endswith("END"), output[-80:]
        assert output.count("of output") == 400
        # The log itself is never rewritten: the end mark stays in it, and readers leave it out.
        assert (logs / f"{name}.log").read_bytes().endswith(b"END" + END_MARK)
        assert read_log(logs / f"{name}.log") == output
        tmux_host.kill(name)


@pytest.mark.acceptance
def test_tmux_leaves_no_file_holding_the_agents_environment(
    tmux_host: TmuxHost, name: str, work: Path, tmp_path: Path
) -> None:
    # The shell wrapper's script holds the agent's keys; it deletes itself before the agent runs.
    env = {**base_env(), "AGENT_KEY": "sk-session-canary-123"}
    tmux_host.start(spec_for(name, ["sh", "-c", "echo started; sleep 30"], work, tmp_path, env=env))
    try:
        wait_for(lambda: "started" in tmux_host.output(name))
        for path in tmp_path.rglob("*"):
            if path.is_file():
                assert b"sk-session-canary-123" not in path.read_bytes(), path
    finally:
        tmux_host.kill(name)


@pytest.mark.acceptance
def test_tmux_kill_ends_a_program_that_ignores_the_hang_up_and_the_stop(
    tmux_host: TmuxHost, name: str, work: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Ending the session hangs up the terminal; an agent that ignores that and SIGTERM is
    # killed once the stop deadline passes (3 s, shortened here), and so is what it started.
    monkeypatch.setattr(tmux, "STOP_DEADLINE_S", 0.3)
    pid_file = tmp_path / "pid"
    script = f'trap "" HUP TERM; sleep 600 & echo $! > {pid_file}; echo started; wait'
    tmux_host.start(spec_for(name, ["sh", "-c", script], work, tmp_path / "logs"))
    wait_for(lambda: "started" in tmux_host.output(name) and pid_file.exists())
    pid = int(pid_file.read_text())
    tmux_host.kill(name)
    assert not tmux_host.exists(name)
    wait_for(lambda: not _pid_alive(pid))


@pytest.mark.acceptance
def test_tmux_knows_a_session_it_ended_is_gone_but_never_starts_a_live_one_twice(
    tmux_socket: str, name: str, work: Path, tmp_path: Path
) -> None:
    # Asking tmux costs a process: a session this host ended is known to be gone (a run asks
    # about every ended item's session as it finishes). A start asks only while the log's
    # session may still run (no exit recorded), so never starts a live one twice.
    host, calls = logged_tmux(tmp_path, tmux_socket)
    spec = spec_for(name, ["sh", "-c", "echo started; sleep 30"], work, tmp_path / "logs")
    try:
        host.start(spec)
        wait_for(lambda: "started" in host.output(name))
        with pytest.raises(SessionExists):
            host.start(spec)
        assert "started" in host.output(name)  # the live session's log was left alone
        assert calls()[:2] == ["new-session", "has-session"]  # it asked
        host.kill(name)
        asked = len(calls())
        assert not host.exists(name)  # it ended it: known without asking
        assert len(calls()) == asked
        wait_for(lambda: recorded_exit(spec.log_path) is not None)  # its wrapper's last word
        host.start(spec)  # nothing of that log runs now: started without asking
        assert calls()[asked:] == ["new-session"]
    finally:
        host.kill(name)


@pytest.mark.acceptance
def test_tmux_a_start_that_loses_a_race_adopts_and_leaves_no_script(
    tmux_socket: str, name: str, work: Path, tmp_path: Path
) -> None:
    # Another harness starts the session just before this host's start: tmux refuses the
    # duplicate, which is said as SessionExists (the caller adopts that session), and the
    # script written for the start that failed, holding the agent's key, is gone.
    racer = tmp_path / "tmux"
    racer.write_text(
        "#!/bin/sh\n"
        'if [ "$3" = new-session ]; then\n'
        f'  tmux -L {tmux_socket} new-session -d -s {name} "sleep 30" \\; '
        f"set-option -t ={name}: @ah_log {tmp_path / 'theirs.log'}\n"
        "fi\n"
        'exec tmux "$@"\n'
    )
    racer.chmod(0o755)
    host = TmuxHost(socket_name=tmux_socket, tmux=str(racer))
    env = {**base_env(), "AGENT_KEY": "sk-race-canary-7"}
    logs = tmp_path / "logs"
    try:
        with pytest.raises(SessionExists):
            host.start(spec_for(name, ["sh", "-c", "echo mine"], work, logs, env=env))
        for path in logs.rglob("*"):
            assert not path.is_file() or b"sk-race-canary-7" not in path.read_bytes(), path
    finally:
        TmuxHost(socket_name=tmux_socket).kill(name)


@pytest.mark.acceptance
def test_tmux_runs_the_agent_in_its_directory_whatever_its_name_and_refuses_a_missing_one(
    tmux_host: TmuxHost, work: Path, tmp_path: Path
) -> None:
    # tmux expands #{...} and #(...) in a start directory; the agent must land in the one named.
    odd = tmp_path / "dir #{session_name} #(touch PWNED)"
    odd.mkdir()
    tmux_host.start(spec_for("odd-dir", ["sh", "-c", "pwd -P"], odd, tmp_path / "logs"))
    wait_for(lambda: ended(tmux_host, "odd-dir"))
    assert tmux_host.output("odd-dir").strip() == str(odd.resolve())
    assert not any(tmp_path.rglob("PWNED")) and not (work / "PWNED").exists()
    missing = tmp_path / "gone"
    tmux_host.start(spec_for("no-dir", ["sh", "-c", "pwd"], missing, tmp_path / "logs"))
    wait_for(lambda: ended(tmux_host, "no-dir"))
    assert tmux_host.status("no-dir").exit_code == 127
    assert "cannot enter" in tmux_host.output("no-dir")


def _start_python_wrapped(
    host: TmuxHost, name: str, script: str, work: Path, tmp_path: Path
) -> None:
    """Start `script` (which says "started") behind the Python wrapper, which an environment
    no shell can export asks for, and wait until it has said so."""
    env = {**base_env(), "odd-name.x": "1"}
    host.start(spec_for(name, ["sh", "-c", script], work, tmp_path / "logs", env=env))
    wait_for(lambda: "started" in host.output(name))


@pytest.mark.acceptance
def test_tmux_kill_ends_an_agent_behind_the_python_wrapper_that_ignores_the_stop(
    tmux_host: TmuxHost, name: str, work: Path, tmp_path: Path
) -> None:
    # The Python wrapper (an environment no shell can export) puts its agent in a group of its
    # own and kills it past its own deadline (3 s): kill must not kill the wrapper first.
    pid_file = tmp_path / "pid"
    script = (
        f'trap "" HUP TERM INT; echo $$ > {pid_file}; echo started; while :; do sleep 0.1; done'
    )
    _start_python_wrapped(tmux_host, name, script, work, tmp_path)
    wait_for(pid_file.exists)
    pid = int(pid_file.read_text())
    tmux_host.kill(name)
    wait_for(lambda: not _pid_alive(pid))


@pytest.mark.acceptance
def test_a_killed_python_wrapped_session_ending_late_leaves_the_next_one_of_its_name_alone(
    tmux_host: TmuxHost, name: str, work: Path, tmp_path: Path
) -> None:
    # The Python wrapper waits for its agent after the kill, then records the exit and copies
    # the last words. By then the item's next session of the name may run on the same log.
    gone = tmp_path / "gone"
    script = (
        f"trap 'sleep 0.5; echo late words; touch {gone}; exit 3' HUP TERM; "
        "echo started; while :; do sleep 0.1; done"
    )
    for emptied in (False, True):  # its log kept aside; then empty, which the next empties
        _start_python_wrapped(tmux_host, name, script, work, tmp_path)
        wrapper_pid = int(tmux_host._run("list-panes", "-t", f"={name}:", "-F", "#{pane_pid}")
                          .stdout.split()[0])  # fmt: skip
        tmux_host.kill(name)
        log = tmp_path / "logs" / f"{name}.log"
        if emptied:
            log.write_bytes(b"")
        tmux_host.start(spec_for(name, ["sh", "-c", "echo again; sleep 600"], work,
                                 tmp_path / "logs"))  # fmt: skip
        wait_for(lambda pid=wrapper_pid: gone.exists() and not _pid_alive(pid))
        assert tmux_host.status(name).alive  # not read as ended by the other's exit
        assert recorded_exit(log) is None
        assert "late words" not in tmux_host.output(name)
        tmux_host.kill(name)
        gone.unlink()


@pytest.mark.acceptance
def test_when_the_tmux_server_dies_its_agents_and_what_they_started_end_too(
    tmux_socket: str, work: Path, tmp_path: Path
) -> None:
    # A SIGKILLed tmux server hangs up every pane, which only the session's leader hears. The
    # agent, and the child it left running, must not live on with nobody to end them.
    host = TmuxHost(socket_name=f"{tmux_socket}-dies")
    pid_file = tmp_path / "pid"
    script = f"sleep 600 & echo $! > {pid_file}; echo started; sleep 600"
    try:
        child = _start_then_kill_the_server(host, "doomed", script, pid_file, work, tmp_path)
        wait_for(lambda: not _pid_alive(child))
        wait_for(lambda: (tmp_path / "logs" / "doomed.log.said").exists())  # its end recorded
    finally:
        host.kill_server()


def _start_then_kill_the_server(
    host: TmuxHost, name: str, script: str, pid_file: Path, work: Path, tmp_path: Path
) -> int:
    """Start `script` (which writes a pid to `pid_file`, then says "started") in a session,
    SIGKILL the tmux server, and return that pid."""
    host.start(spec_for(name, ["sh", "-c", script], work, tmp_path / "logs"))
    wait_for(lambda: "started" in host.output(name) and pid_file.exists())
    pid = int(pid_file.read_text())
    server = host._run("display-message", "-p", "#{pid}").stdout.strip()
    os.kill(int(server), signal.SIGKILL)
    return pid


@pytest.mark.acceptance
def test_an_agent_deaf_to_every_stop_still_ends_when_the_tmux_server_dies(
    tmux_socket: str, work: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # With tmux gone nobody is left to run `kill`, so the pane's copy, which outlives the
    # server, follows its SIGTERM with SIGKILL once the stop deadline passes.
    monkeypatch.setattr(tmux, "STOP_DEADLINE_S", 0.5)
    host = TmuxHost(socket_name=f"{tmux_socket}-deaf")
    pid_file = tmp_path / "pid"
    script = (
        f'trap "" HUP TERM INT; echo $$ > {pid_file}; echo started; while :; do sleep 0.1; done'
    )
    try:
        agent = _start_then_kill_the_server(host, "deaf", script, pid_file, work, tmp_path)
        wait_for(lambda: not _pid_alive(agent))
    finally:
        host.kill_server()


@pytest.mark.integration
def test_a_group_of_only_unreaped_processes_counts_as_ended() -> None:
    # Under an init that does not reap (some containers), a stopped agent lingers as a zombie
    # that still answers signals: tmux's kill must not wait out its deadline for it.
    child = subprocess.Popen(["sleep", "0"], start_new_session=True)
    try:
        wait_for(
            lambda: Path(f"/proc/{child.pid}/stat").read_text().rpartition(")")[2].split()[0] == "Z"
        )
        os.killpg(child.pid, 0)  # the group still answers a signal
        assert not group_alive(child.pid)
    finally:
        child.wait()
    live = subprocess.Popen(["sleep", "30"], start_new_session=True)
    try:
        assert group_alive(live.pid)
    finally:
        live.kill()
        live.wait()


@pytest.mark.integration
def test_headless_status_survives_a_restart_of_the_harness(
    state_dir: Path, name: str, work: Path, agents_dir: Path, tmp_path: Path
) -> None:
    first = HeadlessHost(state_dir)
    first.start(spec_for(name, write_scripted_agent(agents_dir, "ask"), work, tmp_path / "logs"))
    later = HeadlessHost(state_dir)  # a new process knows the session only from its record
    try:
        wait_for(lambda: first.screen(name).endswith("[y/N]"))
        assert later.status(name).alive
        with pytest.raises(SessionExists):
            later.start(spec_for(name, ["true"], work, tmp_path / "logs"))
        later.send_keys(name, "y")
        wait_for(lambda: ended(later, name))
        assert later.status(name).exit_code == 0
        assert later.attach_command(name) == [
            "tail",
            "-n",
            "+1",
            "-f",
            str(tmp_path / "logs" / f"{name}.log"),
        ]
    finally:
        later.kill(name)


def test_wait_ended_returns_when_its_session_ends_not_at_its_timeout(
    local_host: SessionHost, name: str, work: Path, agents_dir: Path, tmp_path: Path
) -> None:
    host = local_host
    assert isinstance(host, HeadlessHost | TmuxHost)
    host.start(spec_for(name, write_scripted_agent(agents_dir, "ask"), work, tmp_path / "logs"))
    try:
        wait_for(lambda: host.screen(name).endswith("[y/N]"))
        host.wait_ended(name, 0.01)  # waiting for its answer: the wait ends at its timeout
        assert host.status(name).alive
        host.send_keys(name, "y")
        # Ten minutes, were it a sleep: it returns the moment the session has ended.
        host.wait_ended(name, 600.0)
        assert host.status(name).exit_code == 0
    finally:
        host.kill(name)


@pytest.mark.integration
def test_headless_kill_ends_a_program_that_ignores_sigterm_and_records_its_end(
    state_dir: Path, name: str, work: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A stop the program ignores must still end in SIGKILL once the stop deadline passes, long
    # before the caller's grace; the deadline (3 s) is shortened here to keep the test quick.
    monkeypatch.setattr(headless, "STOP_DEADLINE_S", 0.3)
    host = HeadlessHost(state_dir)
    script = 'trap "" TERM; echo started; while :; do sleep 0.1; done'
    host.start(spec_for(name, ["sh", "-c", script], work, tmp_path / "logs"))
    wait_for(lambda: "started" in host.output(name))
    host.kill(name, grace_s=30.0)
    assert not host.exists(name)
    assert (tmp_path / "logs" / f"{name}.log.exit").read_text(encoding="utf-8") == "137"


def test_the_program_starts_with_sigpipe_at_its_default(
    host: SessionHost, name: str, work: Path, tmp_path: Path
) -> None:
    # Python ignores SIGPIPE; a program it starts must not inherit that (a pipeline in the
    # agent's shell would see write errors instead of ending quietly).
    host.start(spec_for(name, ["grep", "SigIgn", "/proc/self/status"], work, tmp_path / "logs"))
    wait_for(lambda: ended(host, name))
    ignored = int(host.output(name).split()[-1], 16)
    assert host.status(name).exit_code == 0
    assert not ignored & (1 << (signal.SIGPIPE - 1))


@pytest.mark.integration
def test_remote_attach_is_the_remote_hosts_command_optionally_over_ssh(
    state_dir: Path, name: str, work: Path, agents_dir: Path, tmp_path: Path
) -> None:
    inner = HeadlessHost(state_dir)
    with running_session_server(inner, TOKEN) as server:
        plain = RemoteSessionHost(server.url, TOKEN)
        over_ssh = RemoteSessionHost(server.url, TOKEN, ssh_target="agents@build-1")
        plain.start(spec_for(name, write_scripted_agent(agents_dir, "done"), work, tmp_path))
        local = inner.attach_command(name)
        assert plain.attach_command(name) == local
        assert over_ssh.attach_command(name) == [
            "ssh",
            "-t",
            "agents@build-1",
            " ".join(local),
        ]
        plain.kill(name)
        plain.close()
        over_ssh.close()


@pytest.mark.integration
def test_remote_refuses_a_wrong_token(state_dir: Path, name: str) -> None:
    with running_session_server(HeadlessHost(state_dir), TOKEN) as server:
        client = RemoteSessionHost(server.url, "wrong-token")
        with pytest.raises(SessionHostFailed, match="401"):
            client.status(name)
        client.close()


@pytest.mark.unit
def test_the_session_server_binds_only_to_loopback(state_dir: Path) -> None:
    from agent_harness.testing.session_server import SessionServer

    with pytest.raises(ValueError, match="loopback"):
        SessionServer(HeadlessHost(state_dir), TOKEN, bind="0.0.0.0")


@pytest.mark.unit
def test_default_host_is_tmux_when_installed(
    tmux_socket: str, state_dir: Path, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    chosen = default_host(state_dir)
    assert chosen.kind == "tmux"
    assert chosen.attach_command("x")[:3] == ["tmux", "-L", "agent-harness"]
    empty = tmp_path / "empty-path"
    empty.mkdir()
    monkeypatch.setenv("PATH", str(empty))  # the edge of the process: no tmux to be found
    assert default_host(state_dir).kind == "headless"


@pytest.mark.unit
def test_spec_refuses_an_empty_command(work: Path, tmp_path: Path) -> None:
    from agent_harness.sessions.protocol import SessionError

    with pytest.raises(SessionError):
        spec_for("x", [], work, tmp_path)


def test_no_secret_of_the_harness_is_readable_from_the_agents_parent(
    local_host: SessionHost,
    name: str,
    work: Path,
    agents_dir: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("GH_TOKEN", "ghp_parent_secret")
    argv = write_scripted_agent(agents_dir, {"steps": [{"parent_env_dump": "parent.json"}]})
    spec = spec_for(name, argv, work, tmp_path / "logs")
    local_host.start(spec)
    wait_for(lambda: ended(local_host, name))
    assert local_host.status(name).exit_code == 0
    # The agent's parent is the session wrapper. tmux's runs with an empty environment; the
    # headless shell with the agent's own, and nothing more.
    parent = json.loads((work / "parent.json").read_text())
    assert "ghp_parent_secret" not in json.dumps(parent)
    assert parent.items() <= dict(spec.env).items()
    if local_host.kind == "tmux":
        assert parent == {}


@pytest.mark.acceptance
def test_a_tmux_server_we_start_does_not_hold_the_harness_secrets(
    monkeypatch: pytest.MonkeyPatch, tmux_socket: str, work: Path, agents_dir: Path
) -> None:
    monkeypatch.setenv("GH_TOKEN", "ghp_server_secret")
    host = TmuxHost(socket_name=f"{tmux_socket}-env")
    try:
        host.start(spec_for("probe", write_scripted_agent(agents_dir, "hang"), work, work))
        server_env = subprocess.run(
            ["tmux", "-L", f"{tmux_socket}-env", "show-environment", "-g"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout
        assert "PATH=" in server_env
        assert "GH_TOKEN" not in server_env
    finally:
        host.kill_server()


def test_an_agents_log_is_its_owners_alone(
    host: SessionHost, name: str, work: Path, agents_dir: Path, tmp_path: Path
) -> None:
    # What the agent printed, a key it was handed among it, was 0644 in a folder anyone
    # could list.
    logs = tmp_path / "logs"
    argv = write_scripted_agent(agents_dir, {"steps": [{"print": ["key sk-x"]}], "exit": 0})
    host.start(spec_for(name, argv, work, logs))
    wait_for(lambda: ended(host, name))
    log = logs / f"{safe_session_name(name)}.log"
    assert "key sk-x" in log.read_text()
    assert (log.stat().st_mode & 0o777, logs.stat().st_mode & 0o777) == (0o600, 0o700)
