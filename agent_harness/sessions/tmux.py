"""Sessions as detached tmux sessions on a private server, which a person can attach to."""

from __future__ import annotations

import contextlib
import os
import select
import stat
import subprocess
import sys
import time
from collections.abc import Callable, Mapping
from pathlib import Path

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
    _read_text,
    _write_spec,
    _write_wrapper,
)


def _minimal_env(source: Mapping[str, str]) -> dict[str, str]:
    """What tmux itself needs; a tmux server we start must not hold the harness's secrets."""
    keep = ("PATH", "HOME", "USER", "LANG", "LC_ALL", "LC_CTYPE", "TMUX_TMPDIR", "TMPDIR")
    env = {key: source[key] for key in keep if key in source}
    env.setdefault("PATH", os.defpath)
    return env


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
        name = spec.name
        if self.exists(name):
            if self.status(name).alive:
                raise SessionExists(name)
            self.kill(name)
        _prepare_log(spec)
        wrapper = _write_wrapper(spec.log_path.parent)
        ended = self._watch_end(name, spec.log_path)
        spec_file = _write_spec(spec, ended)
        self._logs[name] = spec.log_path
        target = f"={name}:"
        self._run(
            "new-session", "-d", "-s", name, "-x", "200", "-y", "50", "-c", str(spec.cwd),
            "--", "/usr/bin/env", "-i", sys.executable, "-I", "-S", str(wrapper), str(spec_file),
            ";", "set-option", "-w", "-t", target, "remain-on-exit", "on",
            ";", "set-option", "-t", target, "@ah_log", str(spec.log_path),
        )  # fmt: skip
        self._seen_alive[name] = self._clock()

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
        ready, _, _ = select.select([watched[1]], [], [], max(timeout_s, 0.0))
        if ready:
            # Said once: the pipe stays readable (at its end) from now on, and a later wait
            # must not spin on it.
            self._stop_watching(safe_session_name(name))

    def exists(self, name: str) -> bool:
        name = safe_session_name(name)
        return self._run("has-session", "-t", f"={name}", check=False).returncode == 0

    def status(self, name: str) -> SessionStatus:
        name = safe_session_name(name)
        log = self._log(name)
        if log is None:  # no such session (or not one of ours): nothing is running
            return SessionStatus(False, None)
        code = _read_exit(_exit_path(log))
        if code is not None:
            return SessionStatus(False, code)
        seen = self._seen_alive.get(name)
        if seen is not None and self._clock() - seen < self.PANE_CHECK_S:
            return SessionStatus(True, None)
        done = self._run(
            "list-panes", "-t", f"={name}:", "-F", "#{pane_dead} #{pane_dead_status}", check=False
        )
        fields = done.stdout.split()
        if done.returncode != 0 or not fields:
            return SessionStatus(False, None)
        if fields[0] == "1":
            dead_status = int(fields[1]) if len(fields) > 1 and fields[1].isdigit() else None
            recorded = _read_exit(_exit_path(log))
            return SessionStatus(False, recorded if recorded is not None else dead_status)
        self._seen_alive[name] = self._clock()
        return SessionStatus(True, None)

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
        return _read_text(log)

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
        self._logs.pop(name, None)
        self._seen_alive.pop(name, None)
        self._stop_watching(name)
        self._run("kill-session", "-t", f"={name}", check=False)

    def attach_command(self, name: str) -> list[str]:
        return [*self._base(), "attach", "-t", safe_session_name(name)]

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
