"""Where agent terminals live: a tmux server, plain background processes, or a remote host.

Every session runs behind the same tiny wrapper program, which starts the agent with exactly
the environment it was given, copies everything the agent writes into the session's log file,
and writes the exit code to a file beside that log. So status and output never depend on the
terminal multiplexer or on the process that started the session still being alive.
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import re
import shlex
import shutil
import signal
import stat
import subprocess
import sys
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from agent_harness.errors import HarnessError

_UNSAFE_NAME = re.compile(r"[^A-Za-z0-9_-]+")


def safe_session_name(name: str) -> str:
    """`name` reduced to [A-Za-z0-9_-] so it is safe as a tmux target and a file name."""
    cleaned = _UNSAFE_NAME.sub("-", name).strip("-")
    if not cleaned:
        raise SessionError(f"session name {name!r} has no usable characters")
    return cleaned[:100]


class SessionError(HarnessError):
    """An agent session could not be used."""


class SessionExists(SessionError):
    """A live session with this name already exists."""

    def __init__(self, name: str) -> None:
        self.name = name
        super().__init__(f"session {name} is already running")


class SessionNotFound(SessionError):
    """No session with this name exists."""

    def __init__(self, name: str) -> None:
        self.name = name
        super().__init__(f"no session named {name}")


class SessionNotRunning(SessionError):
    """The session has ended (or has no input), so keys cannot be sent to it."""

    def __init__(self, name: str, why: str = "it has ended") -> None:
        self.name = name
        super().__init__(f"cannot send keys to session {name}: {why}")


class SessionHostFailed(SessionError):
    """The session host itself failed (tmux refused a command, the remote host errored)."""

    def __init__(self, host: str, detail: str) -> None:
        self.host = host
        self.detail = detail
        super().__init__(f"{host} session host failed: {' '.join(detail.split())[:300]}")


@dataclass(frozen=True)
class SessionSpec:
    """What to run in a session. `env` is the complete environment, never merged with ours."""

    name: str
    command: list[str]
    cwd: Path
    env: dict[str, str]
    log_path: Path
    stdin_devnull: bool = False

    def __post_init__(self) -> None:
        object.__setattr__(self, "name", safe_session_name(self.name))
        if not self.command:
            raise SessionError("a session needs a command to run")


@dataclass(frozen=True)
class SessionStatus:
    alive: bool
    exit_code: int | None  # set once the program has ended and its status is known


class SessionHost(Protocol):
    """A place where named agent sessions run and can be watched, answered and stopped."""

    kind: str

    def start(self, spec: SessionSpec) -> None: ...
    def exists(self, name: str) -> bool: ...
    def status(self, name: str) -> SessionStatus: ...
    def screen(self, name: str, lines: int = 50) -> str: ...
    def output(self, name: str) -> str: ...
    def send_keys(self, name: str, text: str, enter: bool = True) -> None: ...
    def kill(self, name: str) -> None: ...
    def attach_command(self, name: str) -> list[str]: ...


HOST_KINDS = ("auto", "tmux", "headless")


def default_host(state_dir: Path, kind: str = "auto") -> SessionHost:
    """tmux (on its own `agent-harness` socket) when installed, else background processes.

    `kind` "tmux" or "headless" asks for one; tmux asked for but not installed is an error
    rather than a quiet fallback, since a person expects to attach to its sessions.
    """
    if kind not in HOST_KINDS:
        raise SessionError(f"unknown session host {kind!r}; use one of {', '.join(HOST_KINDS)}")
    has_tmux = shutil.which("tmux") is not None
    if kind == "tmux" and not has_tmux:
        raise SessionError("sessions.host is tmux, but tmux is not installed (or not on PATH)")
    if kind == "tmux" or (kind == "auto" and has_tmux):
        return TmuxHost(socket_name="agent-harness")
    return HeadlessHost(state_dir)


# ---------------------------------------------------------------------------------------------
# The wrapper every session runs. Kept as source text so it is written beside the logs and run
# with `python -I` under an empty environment: nothing of the harness's environment (tokens
# included) is visible in the wrapper's or the agent's /proc/<pid>/environ.

WRAPPER_SOURCE = r'''
import fcntl, json, os, select, signal, subprocess, sys, termios, time, tty

def main(spec_path):
    with open(spec_path, encoding="utf-8") as fh:
        spec = json.load(fh)
    os.unlink(spec_path)  # it holds the agent's key: gone before the agent starts
    argv, env, cwd = spec["command"], spec["env"], spec["cwd"]
    log = open(spec["log"], "ab", buffering=0)
    stop = []

    def forward(signum, frame):
        stop.append(signum)

    for sig in (signal.SIGTERM, signal.SIGHUP, signal.SIGINT):
        signal.signal(sig, forward)
    code = run_pty(spec, argv, env, cwd, log, stop) if spec["mode"] == "pty" else run_plain(
        spec, argv, env, cwd, log, stop)
    tmp = spec["exit"] + ".tmp"
    with open(tmp, "w", encoding="utf-8") as fh:
        fh.write(str(code))
    os.replace(tmp, spec["exit"])

def stdin_fd(spec):
    if spec["stdin_devnull"]:
        return os.open(os.devnull, os.O_RDONLY)
    if spec.get("fifo"):
        # Read-write, so the agent never sees end-of-file when no writer is connected.
        return os.open(spec["fifo"], os.O_RDWR)
    return None

def code_of(status):
    code = os.waitstatus_to_exitcode(status)
    return 128 - code if code < 0 else code

def signal_child(pid, stop, deadline):
    """Forward a pending stop signal; past the deadline, SIGKILL. Returns the deadline."""
    sig = None
    if stop:
        sig = stop.pop()
        deadline = deadline or time.monotonic() + 3.0
    if deadline is not None and time.monotonic() > deadline:
        sig = signal.SIGKILL
    if sig is not None:
        try:
            os.kill(pid, sig)
        except ProcessLookupError:
            pass
    return deadline

def wait_child(pid, stop, deadline=None):
    while True:
        got, status = os.waitpid(pid, os.WNOHANG)
        if got:
            return code_of(status)
        deadline = signal_child(pid, stop, deadline)
        time.sleep(0.02)

def run_plain(spec, argv, env, cwd, log, stop):
    fd = stdin_fd(spec)
    try:
        child = subprocess.Popen(argv, env=env, cwd=cwd, stdin=fd if fd is not None else
                                 subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT)
    except OSError as exc:
        log.write(("cannot start %s: %s\n" % (argv[0], exc)).encode())
        return 127
    return wait_child(child.pid, stop)

def copy_winsize(dst):
    try:
        size = fcntl.ioctl(0, termios.TIOCGWINSZ, b"\0" * 8)
        fcntl.ioctl(dst, termios.TIOCSWINSZ, size)
    except OSError:
        pass

def run_pty(spec, argv, env, cwd, log, stop):
    devnull = spec["stdin_devnull"]
    pid, master = os.forkpty()
    if pid == 0:
        try:
            os.chdir(cwd)
            if devnull:
                os.dup2(os.open(os.devnull, os.O_RDONLY), 0)
            os.execvpe(argv[0], argv, env)
        except OSError as exc:
            os.write(2, ("cannot start %s: %s\r\n" % (argv[0], exc)).encode())
        os._exit(127)
    copy_winsize(master)
    signal.signal(signal.SIGWINCH, lambda s, f: copy_winsize(master))
    saved = None
    if os.isatty(0):
        saved = termios.tcgetattr(0)
        tty.setraw(0)
    sources = [master, 0]
    deadline = None
    try:
        while True:
            # Keep copying output after a stop signal, so the agent's last words reach the log.
            deadline = signal_child(pid, stop, deadline)
            try:
                ready, _, _ = select.select(sources, [], [], 0.2)
            except InterruptedError:
                continue
            if master in ready:
                try:
                    data = os.read(master, 65536)
                except OSError:
                    data = b""
                if not data:
                    break
                log.write(data)
                try:
                    os.write(1, data)
                except OSError:
                    pass
            if 0 in ready:
                try:
                    data = os.read(0, 4096)
                except OSError:
                    data = b""
                if data:
                    os.write(master, data)
                else:
                    sources.remove(0)
    finally:
        if saved is not None:
            try:
                termios.tcsetattr(0, termios.TCSADRAIN, saved)
            except termios.error:
                pass
    return wait_child(pid, stop, deadline)

main(sys.argv[1])
'''


def _write_wrapper(directory: Path) -> Path:
    path = directory / ".agent-harness-session-wrapper.py"
    if not path.exists() or path.read_text(encoding="utf-8") != WRAPPER_SOURCE:
        tmp = path.with_name(f"{path.name}.{os.getpid()}.tmp")
        tmp.write_text(WRAPPER_SOURCE, encoding="utf-8")
        tmp.replace(path)
    return path


def _exit_path(log_path: Path) -> Path:
    return log_path.with_name(log_path.name + ".exit")


def _read_exit(exit_path: Path) -> int | None:
    try:
        return int(exit_path.read_text(encoding="utf-8").strip())
    except (FileNotFoundError, ValueError):
        return None


def _write_spec(spec: SessionSpec, mode: str, fifo: Path | None) -> Path:
    """The wrapper's instructions, readable only by us; the wrapper deletes it on start."""
    path = spec.log_path.parent / f".{spec.name}.spec.json"
    payload = {
        "command": spec.command,
        "env": spec.env,
        "cwd": str(spec.cwd),
        "log": str(spec.log_path),
        "exit": str(_exit_path(spec.log_path)),
        "stdin_devnull": spec.stdin_devnull,
        "mode": mode,
        "fifo": str(fifo) if fifo else None,
    }
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as fh:
        json.dump(payload, fh)
    return path


def _prepare_log(spec: SessionSpec) -> None:
    spec.log_path.parent.mkdir(parents=True, exist_ok=True)
    spec.log_path.write_bytes(b"")  # a new session starts a new log
    _exit_path(spec.log_path).unlink(missing_ok=True)


def _read_text(path: Path) -> str:
    try:
        return path.read_bytes().decode("utf-8", errors="replace")
    except FileNotFoundError:
        return ""


def _tail_lines(text: str, lines: int) -> str:
    # Trailing spaces dropped, as tmux's capture-pane does, so screens compare alike.
    rows = [row.rstrip() for row in text.replace("\r\n", "\n").replace("\r", "\n").split("\n")]
    while rows and not rows[-1]:
        rows.pop()
    return "\n".join(rows[-lines:]) if lines > 0 else ""


# ---------------------------------------------------------------------------------------------
# tmux


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

    def __init__(self, socket_name: str | None = None, tmux: str = "tmux") -> None:
        self.socket_name = socket_name
        self._tmux = tmux
        self._env = _minimal_env(os.environ)
        self._logs: dict[str, Path] = {}

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
        spec_file = _write_spec(spec, "pty", None)
        self._logs[name] = spec.log_path
        target = f"={name}:"
        self._run(
            "new-session", "-d", "-s", name, "-x", "200", "-y", "50", "-c", str(spec.cwd),
            "--", "/usr/bin/env", "-i", sys.executable, "-I", str(wrapper), str(spec_file),
            ";", "set-option", "-w", "-t", target, "remain-on-exit", "on",
            ";", "set-option", "-t", target, "@ah_log", str(spec.log_path),
        )  # fmt: skip

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


# ---------------------------------------------------------------------------------------------
# headless


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    # An exited child nobody has reaped yet (a zombie) still answers signals; it is not alive.
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return True
    return stat.rpartition(")")[2].split()[:1] != ["Z"]


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
        return _pid_alive(int(record["pid"]))

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
        wrapper = _write_wrapper(spec.log_path.parent)
        spec_file = _write_spec(spec, "plain", fifo)
        with open(os.devnull, "rb") as devnull:
            child = subprocess.Popen(
                [sys.executable, "-I", str(wrapper), str(spec_file)],
                env={},
                cwd=spec.cwd,
                stdin=devnull,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
                start_new_session=True,  # its own process group, so kill reaches the agent too
            )
        self._children[name] = child
        payload = {
            "pid": child.pid,
            "log": str(spec.log_path),
            "exit": str(_exit_path(spec.log_path)),
            "fifo": str(fifo) if fifo else None,
            "started_at": time.time(),
        }
        self._record_path(name).write_text(json.dumps(payload), encoding="utf-8")

    def exists(self, name: str) -> bool:
        return self._record(safe_session_name(name)) is not None

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
        return _tail_lines(_read_text(Path(self._require(name)["log"])), lines)

    def output(self, name: str) -> str:
        name = safe_session_name(name)
        return _read_text(Path(self._require(name)["log"]))

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
        pid = int(record["pid"])
        finished = _read_exit(Path(record["exit"])) is not None
        if not finished and self._wrapper_alive(name, record):
            # The wrapper forwards SIGTERM to the agent and records the exit; SIGKILL the whole
            # group only if that does not end it within the grace period.
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGTERM)
            deadline = time.monotonic() + grace_s
            while self._wrapper_alive(name, record) and time.monotonic() < deadline:
                time.sleep(0.02)
            if self._wrapper_alive(name, record):
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.killpg(pid, signal.SIGKILL)
                child = self._children.get(name)
                if child is not None:
                    with contextlib.suppress(subprocess.TimeoutExpired):
                        child.wait(timeout=grace_s)
        self._children.pop(name, None)
        # A killed session is gone, as with tmux: its record and input pipe go; the log stays.
        if record.get("fifo"):
            Path(record["fifo"]).unlink(missing_ok=True)
        self._record_path(name).unlink(missing_ok=True)

    def attach_command(self, name: str) -> list[str]:
        name = safe_session_name(name)
        return ["tail", "-n", "+1", "-f", str(self._require(name)["log"])]


# ---------------------------------------------------------------------------------------------
# remote


class RemoteSessionHost:
    """A client for a session host on another machine, speaking the JSON API served by
    `agent_harness.testing.session_server` (documented there).

    Paths in a `SessionSpec` (cwd, log) are paths on the remote machine. `attach_command`
    returns the remote host's own attach command, prefixed with `ssh -t <ssh_target>` when an
    ssh target is given, so a person can run it from here.
    """

    kind = "remote"

    def __init__(
        self,
        base_url: str,
        token: str,
        transport: Any = None,
        *,
        ssh_target: str | None = None,
        timeout_s: float = 30.0,
    ) -> None:
        import httpx

        self.base_url = base_url.rstrip("/")
        self.ssh_target = ssh_target
        self._client = httpx.Client(
            base_url=self.base_url,
            transport=transport,
            headers={"Authorization": f"Bearer {token}"},
            timeout=timeout_s,
        )

    def close(self) -> None:
        self._client.close()

    def _call(self, method: str, path: str, name: str | None = None, **kwargs: Any) -> Any:
        import httpx

        try:
            response = self._client.request(method, path, **kwargs)
        except httpx.HTTPError as exc:
            raise SessionHostFailed("remote", f"{method} {path}: {exc}") from exc
        if response.status_code == 404 and name is not None:
            raise SessionNotFound(name)
        if response.status_code == 409 and name is not None:
            kind = _json_field(response, "error")
            if kind == "not_running":
                raise SessionNotRunning(name)
            raise SessionExists(name)
        if response.status_code >= 400:
            message = _json_field(response, "message") or response.text
            raise SessionHostFailed("remote", f"{response.status_code}: {message}")
        return response

    def start(self, spec: SessionSpec) -> None:
        body = {
            "name": spec.name,
            "command": spec.command,
            "cwd": str(spec.cwd),
            "env": spec.env,
            "log_path": str(spec.log_path),
            "stdin_devnull": spec.stdin_devnull,
        }
        self._call("POST", "/sessions", spec.name, json=body)

    def exists(self, name: str) -> bool:
        name = safe_session_name(name)
        try:
            self._call("GET", f"/sessions/{name}", name)
        except SessionNotFound:
            return False
        return True

    def status(self, name: str) -> SessionStatus:
        name = safe_session_name(name)
        try:
            data = self._call("GET", f"/sessions/{name}", name).json()
        except SessionNotFound:
            return SessionStatus(False, None)
        code = data.get("exit_code")
        return SessionStatus(bool(data.get("alive")), int(code) if code is not None else None)

    def screen(self, name: str, lines: int = 50) -> str:
        name = safe_session_name(name)
        data = self._call("GET", f"/sessions/{name}/screen", name, params={"lines": lines}).json()
        return str(data["screen"])

    def output(self, name: str) -> str:
        name = safe_session_name(name)
        response = self._call("GET", f"/sessions/{name}/output", name)
        return bytes(response.content).decode("utf-8", errors="replace")

    def send_keys(self, name: str, text: str, enter: bool = True) -> None:
        name = safe_session_name(name)
        self._call("POST", f"/sessions/{name}/keys", name, json={"text": text, "enter": enter})

    def kill(self, name: str) -> None:
        name = safe_session_name(name)
        with contextlib.suppress(SessionNotFound):
            self._call("DELETE", f"/sessions/{name}", name)

    def attach_command(self, name: str) -> list[str]:
        name = safe_session_name(name)
        command = [str(x) for x in self._call("GET", f"/sessions/{name}/attach", name).json()]
        if self.ssh_target:
            return ["ssh", "-t", self.ssh_target, shlex.join(command)]
        return command


def _json_field(response: Any, key: str) -> Any:
    try:
        data = response.json()
    except ValueError:
        return None
    return data.get(key) if isinstance(data, dict) else None
