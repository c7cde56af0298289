"""Sessions as plain background processes with no terminal, known again from a record file."""

from __future__ import annotations

import contextlib
import errno
import json
import os
import select
import signal
import subprocess
import time
from pathlib import Path
from typing import Any

from agent_harness.sessions.processes import pid_alive, same_process, start_time
from agent_harness.sessions.protocol import (
    SessionExists,
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
    _tail_lines,
    read_log,
)

# The headless wrapper: a POSIX shell, which starts in about a millisecond where Python takes
# 15 to 20 (the tmux host still needs the Python one, for its terminal). It runs the agent in
# the foreground with exactly the environment it was given (the shell's own PWD is dropped
# unless the agent's environment has one) and writes its exit status, 128 + N for a signal,
# beside the log, so the status outlives the process that started the session. A stop signal
# reaches the agent from `kill`, which signals the whole process group: the shell only notes it
# (`:`, not ignoring it, which the agent would inherit) and keeps waiting for the agent.
# $1: the exit file; $2: "pwd" to keep PWD; the rest: the agent's argv.
_SH_WRAPPER = """trap : HUP INT TERM
e=$1; [ "$2" = pwd ] || unset PWD; shift 2
if command -v "$1" >/dev/null 2>&1; then "$@"; c=$?
else printf 'cannot start %s: no such program\\n' "$1"; c=127; fi
printf %s "$c" > "$e"
"""


# How long a stopped agent has to end before it is killed.
STOP_DEADLINE_S = 3.0


class HeadlessHost:
    """Background processes with their output in a log file, and no terminal.

    Each session leaves a record (`<state_dir>/sessions/<name>.json`: wrapper pid, log, exit
    file, input pipe), so a later process can still answer `status`, `output` and `kill` for a
    session an earlier one started. Keys are written to a named pipe the agent reads as stdin.
    """

    kind = "headless"

    def __init__(self, state_dir: Path) -> None:
        self.state_dir = Path(state_dir)
        self._records = self.state_dir / "sessions"
        self._children: dict[str, subprocess.Popen[bytes]] = {}

    def _record_path(self, name: str) -> Path:
        return self._records / f"{name}.json"

    def _record(self, name: str) -> dict[str, Any] | None:
        try:
            data = json.loads(self._record_path(name).read_text(encoding="utf-8"))
        except (FileNotFoundError, ValueError):
            return None
        return data if isinstance(data, dict) else None

    def _wrapper_alive(self, name: str, record: dict[str, Any]) -> bool:
        child = self._children.get(name)
        if child is not None and child.pid == record.get("pid"):
            return child.poll() is None  # reaps it, so a finished child is never a zombie
        return pid_alive(int(record["pid"]), record.get("start"))

    def start(self, spec: SessionSpec) -> None:
        name = spec.name
        record = self._record(name)
        if record is not None and self.status(name).alive:
            raise SessionExists(name)
        self._records.mkdir(parents=True, exist_ok=True)
        _prepare_log(spec)
        fifo: Path | None = None
        if not spec.stdin_devnull:
            fifo = self._records / f"{name}.stdin"
            fifo.unlink(missing_ok=True)
            os.mkfifo(fifo, 0o600)
        keep_pwd = "pwd" if "PWD" in spec.env else "-"
        argv = ["/bin/sh", "-c", _SH_WRAPPER, "agent-harness", str(_exit_path(spec.log_path))]
        # A pipe opened for reading and writing: the agent never sees end-of-file on it.
        stdin = os.open(fifo if fifo else os.devnull, os.O_RDWR if fifo else os.O_RDONLY)
        try:
            with open(spec.log_path, "ab", buffering=0) as log:
                child = subprocess.Popen(
                    [*argv, keep_pwd, *spec.command],
                    env=dict(spec.env),
                    cwd=spec.cwd,
                    stdin=stdin,
                    stdout=log,
                    stderr=log,
                    start_new_session=True,  # its own process group: kill reaches the agent
                )
        finally:
            os.close(stdin)
        self._children[name] = child
        payload = {
            "pid": child.pid,
            "start": start_time(child.pid),  # tells the wrapper from a later owner of its id
            "log": str(spec.log_path),
            "exit": str(_exit_path(spec.log_path)),
            "fifo": str(fifo) if fifo else None,
            "started_at": time.time(),
        }
        self._record_path(name).write_text(json.dumps(payload), encoding="utf-8")

    def exists(self, name: str) -> bool:
        return self._record(safe_session_name(name)) is not None

    def wait_ended(self, name: str, timeout_s: float) -> None:
        """Wait up to `timeout_s` for session `name` to end, returning as soon as it has: a
        watcher asks `status` the moment the agent is done instead of at its next look. A
        session another process started (or a system without pidfds) is waited for by
        sleeping `timeout_s`."""
        child = self._children.get(safe_session_name(name))
        if child is not None and child.returncode is not None:
            return
        try:
            # A pidfd is readable once the process has ended; it is never reaped here, so the
            # pid cannot be reused while we hold it.
            ended = os.pidfd_open(child.pid) if child is not None else None
        except (AttributeError, OSError):
            ended = None
        if ended is None:
            time.sleep(timeout_s)
            return
        try:
            select.select([ended], [], [], max(timeout_s, 0.0))
        finally:
            os.close(ended)

    def status(self, name: str) -> SessionStatus:
        name = safe_session_name(name)
        record = self._record(name)
        if record is None:
            return SessionStatus(False, None)
        code = _read_exit(Path(record["exit"]))
        if code is not None:
            return SessionStatus(False, code)
        if self._wrapper_alive(name, record):
            return SessionStatus(True, None)
        # The wrapper may have finished between the two reads.
        return SessionStatus(False, _read_exit(Path(record["exit"])))

    def _require(self, name: str) -> dict[str, Any]:
        record = self._record(name)
        if record is None:
            raise SessionNotFound(name)
        return record

    def screen(self, name: str, lines: int = 50) -> str:
        name = safe_session_name(name)
        return _tail_lines(read_log(Path(self._require(name)["log"])), lines)

    def output(self, name: str) -> str:
        name = safe_session_name(name)
        return read_log(Path(self._require(name)["log"]))

    def send_keys(self, name: str, text: str, enter: bool = True) -> None:
        name = safe_session_name(name)
        record = self._require(name)
        if not record.get("fifo"):
            raise SessionNotRunning(name, "its input is /dev/null")
        if not self.status(name).alive:
            raise SessionNotRunning(name)
        data = (text + ("\n" if enter else "")).encode("utf-8")
        try:
            fd = os.open(record["fifo"], os.O_WRONLY | os.O_NONBLOCK)
        except OSError as exc:
            if exc.errno in (errno.ENXIO, errno.ENOENT):
                raise SessionNotRunning(name) from exc
            raise
        try:
            os.write(fd, data)
        finally:
            os.close(fd)

    def kill(self, name: str, grace_s: float = 3.0) -> None:
        name = safe_session_name(name)
        record = self._record(name)
        if record is None:
            return
        finished = _read_exit(Path(record["exit"])) is not None
        if not finished and self._wrapper_alive(name, record):
            self._stop(name, record, grace_s)
        self._children.pop(name, None)
        # A killed session is gone, as with tmux: its record and input pipe go; the log stays.
        if record.get("fifo"):
            Path(record["fifo"]).unlink(missing_ok=True)
        self._record_path(name).unlink(missing_ok=True)

    def _stop(self, name: str, record: dict[str, Any], grace_s: float) -> None:
        """SIGTERM to the session's process group: the agent gets it, and the wrapper, waiting
        on, records how it ended. Past `grace_s` (at most STOP_DEADLINE_S), SIGKILL to the
        group: an agent ignoring the stop, and what it started and left running (a tool, a
        server), which would otherwise outlive every killed session. The group cannot have been
        reused while anything in it lives; its id, once all of it ended, can, so a group whose
        id now leads a process of another start is left alone. A wrapper killed with it
        records nothing, so the exit is recorded here: 137, as the wrapper would have for its
        agent."""
        pid, start = int(record["pid"]), record.get("start")
        if same_process(pid, start):
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(pid, signal.SIGTERM)
        deadline = time.monotonic() + min(grace_s, STOP_DEADLINE_S)
        while self._wrapper_alive(name, record) and time.monotonic() < deadline:
            time.sleep(0.02)
        if same_process(pid, start):
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(pid, signal.SIGKILL)
        child = self._children.get(name)
        if child is not None:
            with contextlib.suppress(subprocess.TimeoutExpired):
                child.wait(timeout=grace_s)
        exit_path = Path(record["exit"])
        if _read_exit(exit_path) is None and not self._wrapper_alive(name, record):
            tmp = exit_path.with_name(exit_path.name + ".tmp")
            tmp.write_text(str(128 + signal.SIGKILL), encoding="utf-8")
            tmp.replace(exit_path)

    def attach_command(self, name: str) -> list[str]:
        name = safe_session_name(name)
        return ["tail", "-n", "+1", "-f", str(self._require(name)["log"])]
