"""Sessions as detached tmux sessions on a private server, which a person can attach to."""

from __future__ import annotations

import contextlib
import os
import select
import shlex
import signal
import stat
import subprocess
import sys
import time
from collections.abc import Callable, Mapping
from pathlib import Path

from agent_harness.sessions.processes import group_alive
from agent_harness.sessions.protocol import (
    SessionExists,
    SessionHostFailed,
    SessionNotFound,
    SessionNotRunning,
    SessionSpec,
    SessionStatus,
    safe_session_name,
)
from agent_harness.sessions.wrapper import (
    _exit_path,
    _prepare_log,
    _read_exit,
    _write_spec,
    _write_wrapper,
    exit_recorded,
    exit_unsettled,
    read_log,
    recorded_exit,
    settled_exit,
    shell_can_export,
    shell_wrapper_path,
    write_shell_wrapper,
)

# How long a killed session's processes have to end before they are killed outright.
STOP_DEADLINE_S = 3.0


# The pane's copy into its log (`pipe-pane`), run by tmux's `sh -c` after `p=<the pane
# program's pid>; looks=<n>; log=<path>`. Once the copy ends (tmux closed the pane, or died), the
# program's process group gets SIGTERM, and SIGKILL if still there after `looks` tenths of a
# second; but only while that group is the program's: its start time is noted before the copy
# begins, and a process of another start that has since been given the id (a pane whose
# program ended long before, on a busy machine) leads a stranger's group, which is left alone.
# With the leader gone, a group still alive is the program's (an id stays taken while any member
# has it). A process there whose start cannot be read (`?`: a name with a newline, a read that
# failed) is never taken for the program. The stat is read by the shell's own `read`, not a
# `cat`: one process fewer per session. `AH_PANE_START`, when set, stands for the noted start
# (for tests).
PANE_END = (
    'started() { if [ -d /proc/self ]; then [ -e "/proc/$1" ] || return 0; '
    'l=; { read -r l < "/proc/$1/stat"; } 2>/dev/null; set -- ${l##*") "}; '
    'if [ $# -ge 20 ]; then shift 19; echo "$1"; else echo "?"; fi; '
    'else ps -o lstart= -p "$1" 2>/dev/null; fi; }; '
    'ours() { now=$(started "$p"); if [ -z "$now" ]; then kill -0 -"$p" 2>/dev/null; '
    'else [ "$now" != "?" ] && [ "$now" = "$s" ]; fi; }; '
    's=${AH_PANE_START-$(started "$p")}; cat >> "$log"; '
    '[ "$p" -gt 1 ] 2>/dev/null && ours && kill -TERM -"$p" 2>/dev/null && '
    '{ n=0; while sleep 0.1 && ours && kill -0 -"$p" 2>/dev/null; do n=$((n+1)); '
    '[ $n -ge "$looks" ] && { ours && kill -KILL -"$p"; break; }; done; }'
)


def _minimal_env(source: Mapping[str, str]) -> dict[str, str]:
    """What tmux itself needs; a tmux server we start must not hold the harness's secrets."""
    keep = ("PATH", "HOME", "USER", "LANG", "LC_ALL", "LC_CTYPE", "TMUX_TMPDIR", "TMPDIR")
    env = {key: source[key] for key in keep if key in source}
    env.setdefault("PATH", os.defpath)
    return env


def _stop_group(pid: int) -> None:
    """End the process group of a pane's program (tmux made it a group of its own), as the
    headless host does: the terminal's hang-up is not enough for an agent that ignores it,
    nor for what it started and left running. SIGTERM, then SIGKILL past STOP_DEADLINE_S."""
    try:
        os.killpg(pid, signal.SIGTERM)
    except (ProcessLookupError, PermissionError):
        return
    deadline = time.monotonic() + STOP_DEADLINE_S
    while time.monotonic() < deadline:
        if not group_alive(pid):
            return
        time.sleep(0.01)
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, signal.SIGKILL)


def _unformatted(text: str) -> str:
    """`text` as tmux reads it back from a format it expands (`#{...}`, `#(command)`)."""
    return text.replace("#", "##")


def _untimed(text: str) -> str:
    """`text` as tmux reads it back from a format it also expands as a strftime text (the
    command of `pipe-pane`, where `%d` would become the day)."""
    return _unformatted(text).replace("%", "%%")


def _program(
    spec: SessionSpec, ended: Path | None, target: str
) -> tuple[Path, list[str], list[str], str]:
    """The session's script, the program tmux starts with it, the copy of its terminal
    into the log to ask for in the same call, and which wrapper it is."""
    if shell_can_export(spec.env):
        # The agent runs on the pane's own terminal, under a shell script (a millisecond to
        # start, where Python takes twenty), and tmux copies what it writes there into the
        # log. The copy is asked for in the same call that makes the session, so tmux
        # sets it up before it reads a byte the agent wrote.
        script = write_shell_wrapper(spec, ended)
        program = ["/usr/bin/env", "-i", "/bin/sh", str(script)]
        log = _untimed(shlex.quote(str(spec.log_path)))
        # The copy ends when tmux closes the pane, or dies: then the pane's process group
        # is stopped. A hang-up reaches only the session's leader (the script, which waits
        # on for its agent), so without this an agent outlived a SIGKILLed tmux server.
        # As `kill` does, a group still there STOP_DEADLINE_S after SIGTERM gets SIGKILL;
        # it is looked at every tenth of a second, so a group that ends on SIGTERM (or had
        # ended before) leaves nothing waiting; a group whose id went to another since is
        # left alone (PANE_END). (`#{pane_pid}` is the script's pid, and its group's.)
        looks = max(1, round(STOP_DEADLINE_S * 10))
        copy_then_stop = f"p=#{{pane_pid}}; looks={looks}; log={log}; {_untimed(PANE_END)}"
        copy = [";", "pipe-pane", "-t", target, copy_then_stop]
        return script, program, copy, "shell"
    wrapper = _write_wrapper(spec.log_path.parent)
    script = _write_spec(spec, ended)
    program = ["/usr/bin/env", "-i", sys.executable, "-I", "-S", str(wrapper), str(script)]
    return script, program, [], "python"


class TmuxHost:
    """One detached tmux session per item, on a private server when `socket_name` is given.

    A person attaches read-write with `tmux -L <socket> attach -t <name>`. The pane stays after
    the program ends (remain-on-exit), so its final screen can still be read.
    """

    kind = "tmux"

    # How long a session this host started is taken to be alive without asking tmux, while
    # its wrapper has written no exit status: the wrapper writes it before it ends, so tmux
    # is only the witness of a wrapper that died without a word.
    PANE_CHECK_S = 0.25
    STATUS_WAIT_S = 2.0  # how long a dead pane may go without an exit status before it counts

    def __init__(
        self,
        socket_name: str | None = None,
        tmux: str = "tmux",
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.socket_name = socket_name
        self._tmux = tmux
        self._env = _minimal_env(os.environ)
        self._logs: dict[str, Path] = {}
        self._clock = clock
        self._seen_alive: dict[str, float] = {}  # session -> when tmux last said it was
        self._ended_here: set[str] = set()  # sessions this host killed and has not restarted
        self._status_unknown: dict[str, float] = {}  # dead pane, no exit status yet: since when
        self._exit_seen: dict[str, float] = {}  # when an exit the wrapper recorded was first seen
        # session -> the named pipe its wrapper opens once it has ended, and our read end
        self._ended: dict[str, tuple[Path, int]] = {}

    def _base(self) -> list[str]:
        base = [self._tmux]
        if self.socket_name:
            base += ["-L", self.socket_name]
        return base

    def _run(self, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        for attempt in range(4):
            try:
                done = subprocess.run(
                    [*self._base(), *args],
                    capture_output=True,
                    text=True,
                    env=self._env,
                    timeout=30,
                    check=False,
                )
            except (OSError, subprocess.TimeoutExpired) as exc:
                raise SessionHostFailed("tmux", str(exc)) from exc
            # When the last session is killed the server exits; a command that reaches it
            # while it is going down hears this, and a fresh server answers the next try.
            if "server exited unexpectedly" not in done.stderr or attempt == 3:
                break
            time.sleep(0.05 * (attempt + 1))
        if check and done.returncode != 0:
            raise SessionHostFailed("tmux", done.stderr or f"tmux {args[0]} failed")
        return done

    def _option(self, name: str, option: str) -> str | None:
        done = self._run("show-options", "-t", f"={name}:", "-v", option, check=False)
        value = done.stdout.strip()
        return value if done.returncode == 0 and value else None

    def _log(self, name: str) -> Path | None:
        # Remembered per name: a poll loop asks for it several times a second. A session
        # restarted under the same name by another process gets a fresh lookup via start/kill
        # here, and otherwise keeps the same log path (it is derived from the name).
        if name not in self._logs:
            value = self._option(name, "@ah_log")
            if not value:
                return None
            self._logs[name] = Path(value)
        return self._logs[name]

    def start(self, spec: SessionSpec) -> None:
        self._start(spec, again=False)

    def _start(self, spec: SessionSpec, again: bool) -> None:
        name = spec.name
        # tmux is asked about an earlier session only while one may still run: not when its
        # log is missing (none of this name and state folder ever started) or its exit is
        # recorded. A name is one state folder's alone, and the log's path comes from it, so
        # two files save a tmux call per start. (Read before the log is moved aside below.)
        ended = recorded_exit(spec.log_path) is not None  # it has ended, or ends in a moment
        if not ended and spec.log_path.exists() and self._has_session(name):
            if self.status(name).alive:
                raise SessionExists(name)
            self.kill(name)
        self._ended_here.discard(name)
        self._forget_exit(name)
        _prepare_log(spec)
        pipe = self._watch_end(name, spec.log_path)
        self._logs[name] = spec.log_path
        target = f"={name}:"
        script, program, copy, kind = _program(spec, pipe, target)
        try:
            self._run(
                "new-session", "-d", "-s", name, "-x", "200", "-y", "50",
                "-c", _unformatted(str(spec.cwd)),
                "--", *program, *copy,
                ";", "set-option", "-w", "-t", target, "remain-on-exit", "on",
                ";", "set-option", "-t", target, "@ah_log", str(spec.log_path),
                ";", "set-option", "-t", target, "@ah_wrapper", kind,
            )  # fmt: skip
        except SessionHostFailed as exc:
            # Nothing of a session that did not start stays: not its script (it holds the
            # agent's keys), nor the pipe watched for its end.
            script.unlink(missing_ok=True)
            self._stop_watching(name)
            self._logs.pop(name, None)
            if "duplicate session" not in exc.detail:
                raise
            # Either another process started it just now, or the session that recorded its
            # exit (so tmux was not asked first) is still there, its pane dead or its wrapper
            # a moment from its end: that one goes, and the session starts once more.
            if again or not (ended or self._pane_dead(name)):
                raise SessionExists(name) from None
            self.kill(name)
            self._start(spec, again=True)
            return
        self._seen_alive[name] = self._clock()

    def _pane_dead(self, name: str) -> bool:
        """Whether tmux holds session `name` with its program ended (remain-on-exit)."""
        done = self._run("list-panes", "-t", f"={name}:", "-F", "#{pane_dead}", check=False)
        return done.returncode == 0 and done.stdout.split()[:1] == ["1"]

    def _watch_end(self, name: str, log_path: Path) -> Path | None:
        """A named pipe beside the log, open for reading here before the wrapper starts, that
        the wrapper opens once it has ended (see `wait_ended`); None where none can be made."""
        self._stop_watching(name)
        path = log_path.with_name(log_path.name + ".ended")
        try:
            path.unlink(missing_ok=True)
            os.mkfifo(path, 0o600)
            self._ended[name] = (path, os.open(path, os.O_RDONLY | os.O_NONBLOCK))
        except OSError:
            return None
        return path

    def _stop_watching(self, name: str) -> None:
        watched = self._ended.pop(name, None)
        if watched is not None:
            os.close(watched[1])
            watched[0].unlink(missing_ok=True)

    def wait_ended(self, name: str, timeout_s: float) -> None:
        """Wait up to `timeout_s` for session `name` to end, returning as soon as its wrapper
        says it has (through the pipe `start` made). A session another process started is
        waited for by sleeping `timeout_s`."""
        watched = self._ended.get(safe_session_name(name))
        if watched is None:
            time.sleep(timeout_s)
            return
        deadline = time.monotonic() + max(timeout_s, 0.0)
        ready, _, _ = select.select([watched[1]], [], [], max(timeout_s, 0.0))
        if not ready:
            return
        # Said once: the pipe stays readable (at its end) from now on, and a later wait must
        # not spin on it.
        self._stop_watching(safe_session_name(name))
        # The agent's last output may still be on its way to the log (see `settled_exit`):
        # a short wait here saves the caller a whole pause.
        log = self._logs.get(safe_session_name(name))
        settle = min(deadline, time.monotonic() + 0.1)
        while log is not None and time.monotonic() < settle:
            if _read_exit(_exit_path(log)) is not None:
                return
            waited = self._waited(safe_session_name(name), log)
            if waited is not None and settled_exit(log, waited) is not None:
                return
            time.sleep(0.001)

    def exists(self, name: str) -> bool:
        name = safe_session_name(name)
        # A session this host ended is gone: a run closing its ended items' sessions asks about
        # every one of them. (One another process started since under the same name is not
        # seen here; `start` always asks tmux.)
        return name not in self._ended_here and self._has_session(name)

    def _has_session(self, name: str) -> bool:
        return self._run("has-session", "-t", f"={name}", check=False).returncode == 0

    def status(self, name: str) -> SessionStatus:
        name = safe_session_name(name)
        log = self._log(name)
        if log is None:  # no such session (or not one of ours): nothing is running
            return SessionStatus(False, None)
        code = _read_exit(_exit_path(log))
        waited = self._waited(name, log)  # None while the wrapper has recorded no exit
        if code is None and waited is not None:
            code = settled_exit(log, waited)
        if code is not None:
            return SessionStatus(False, code)
        if waited is not None and exit_unsettled(log, waited):
            # The agent has ended, but not all it wrote is in the log yet, whatever tmux says
            # of the pane (dead, or gone): an end seen now would lose its last words (its
            # usage, its error). Asked again shortly.
            return SessionStatus(True, None)
        seen = self._seen_alive.get(name)
        if seen is not None and self._clock() - seen < self.PANE_CHECK_S:
            return SessionStatus(True, None)
        done = self._run(
            "list-panes", "-t", f"={name}:", "-F",
            "#{pane_dead}:#{pane_dead_status}:#{pane_dead_signal}", check=False,
        )  # fmt: skip
        dead, status, signal = [*done.stdout.strip().split(":"), "", ""][:3]
        if done.returncode != 0 or not dead:  # gone (killed, or its server died)
            return SessionStatus(False, recorded_exit(log))
        if dead == "1":
            return self._dead(name, log, status, signal)
        self._seen_alive[name] = self._clock()
        return SessionStatus(True, None)

    def _forget_exit(self, name: str) -> None:
        """What this host learnt of how the session `name` ended (it is starting again, or gone)."""
        self._status_unknown.pop(name, None)
        self._exit_seen.pop(name, None)

    def _waited(self, name: str, log: Path) -> float | None:
        """How long this host has known the wrapper recorded the session's exit (on its own
        clock, which nobody sets); None when it has not."""
        if not exit_recorded(log):
            return None
        now = self._clock()
        return now - self._exit_seen.setdefault(name, now)

    def _dead(self, name: str, log: Path, status: str, signal: str) -> SessionStatus:
        """A pane whose program ended: the code its wrapper recorded, else tmux's. tmux can see
        the terminal close before it has the exit status; for up to STATUS_WAIT_S that counts
        as not ended yet (a tmux too old to name a signal leaves both empty for good)."""
        recorded = recorded_exit(log)
        if recorded is not None:
            return SessionStatus(False, recorded)
        if status.isdigit():
            return SessionStatus(False, int(status))
        if signal.isdigit():
            return SessionStatus(False, 128 + int(signal))
        first = self._status_unknown.setdefault(name, time.monotonic())
        if time.monotonic() - first < self.STATUS_WAIT_S:
            return SessionStatus(True, None)
        return SessionStatus(False, None)

    def screen(self, name: str, lines: int = 50) -> str:
        name = safe_session_name(name)
        done = self._run(
            "capture-pane", "-p", "-J", "-t", f"={name}:", "-S", str(-max(lines, 1)), check=False
        )
        if done.returncode != 0:
            raise SessionNotFound(name)
        rows = [row.rstrip() for row in done.stdout.split("\n")]  # -J keeps trailing blanks
        while rows and (not rows[-1] or rows[-1].startswith("Pane is dead")):
            rows.pop()  # blank rows, and the banner tmux writes under a finished program
        return "\n".join(rows[-lines:])

    def output(self, name: str) -> str:
        name = safe_session_name(name)
        log = self._log(name)
        if log is None:
            raise SessionNotFound(name)
        return read_log(log)

    def send_keys(self, name: str, text: str, enter: bool = True) -> None:
        name = safe_session_name(name)
        if not self.status(name).alive:
            raise SessionNotRunning(name)
        target = f"={name}:"
        if text:
            self._run("send-keys", "-t", target, "-l", text)
        if enter:
            self._run("send-keys", "-t", target, "Enter")

    def kill(self, name: str) -> None:
        name = safe_session_name(name)
        log = self._logs.pop(name, None)
        self._seen_alive.pop(name, None)
        self._forget_exit(name)
        self._stop_watching(name)
        # Which process runs in the pane, and behind which wrapper, asked in the same call
        # that ends the session.
        done = self._run(
            "list-panes", "-t", f"={name}:", "-F", "#{pane_dead} #{pane_pid} #{@ah_wrapper}",
            ";", "kill-session", "-t", f"={name}",
            check=False,
        )  # fmt: skip
        fields = done.stdout.split()
        # The shell wrapper's agent is in the pane's process group. The Python wrapper gave
        # its agent a terminal and a group of their own, and stops it itself (its own deadline
        # is later than ours: killing it first would leave the agent running).
        if fields[:1] == ["0"] and fields[1:2] and fields[1].isdigit() and fields[2:] == ["shell"]:
            _stop_group(int(fields[1]))
        self._ended_here.add(name)
        if log is not None:  # a script that could not delete itself (no rm where it looked)
            shell_wrapper_path(log, name).unlink(missing_ok=True)

    def attach_command(self, name: str, *, read_only: bool = False) -> list[str]:
        """The command that attaches a terminal to session `name`; with `read_only`, one whose
        keys never reach the agent (but the detach key)."""
        only = ["-r"] if read_only else []
        return [*self._base(), "attach", *only, "-t", safe_session_name(name)]

    def server_gone(self) -> bool:
        """Whether the tmux server itself is gone (`tmux kill-server`, its crash): then every
        session on it ended at once, whatever their programs were doing."""
        listed = self._run("list-sessions", check=False)
        return listed.returncode != 0 and (
            "no server running" in listed.stderr or "error connecting" in listed.stderr
        )

    def kill_server(self) -> None:
        """Stop the whole private tmux server (only ever used with a private socket)."""
        if self.socket_name:
            self._run("kill-server", check=False)
            # tmux leaves the socket file behind; a private one is ours to tidy. Its place is
            # tmux's documented default: $TMUX_TMPDIR (or /tmp), tmux-<uid>, the socket name.
            base = Path(self._env.get("TMUX_TMPDIR") or "/tmp")
            socket_path = base / f"tmux-{os.getuid()}" / self.socket_name
            with contextlib.suppress(OSError):
                if stat.S_ISSOCK(socket_path.stat().st_mode):
                    socket_path.unlink()
