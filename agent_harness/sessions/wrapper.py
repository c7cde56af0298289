"""The small wrappers tmux sessions run, and the files every session leaves beside its log.

A wrapper starts the agent with exactly the environment it was given and records the exit
code, so status and output never depend on the multiplexer or on the process that started the
session still being alive. The usual one is a shell script written for the session: the agent
runs on the pane's own terminal and tmux copies what it writes to the log (`pipe-pane`). The
Python one sits between the pane and a terminal of its own and copies the output itself; it is
kept for an environment a shell cannot export (a variable whose name is no shell name).
"""

from __future__ import annotations

import contextlib
import importlib.util
import marshal
import os
import re
import shlex
import sys
import threading
import time
from collections.abc import Mapping
from pathlib import Path

from agent_harness.sessions.protocol import SessionSpec

# tmux runs it between its pane and a pseudo-terminal of the wrapper's own (the headless host
# has a shell wrapper, see `headless`). It starts with `python -I -S` (no site-packages to
# scan: it needs only the standard library), and its instructions are in marshal's format
# (built in; it runs on the very interpreter that wrote them, `sys.executable`).
WRAPPER_SOURCE = r'''
import marshal, os, select, signal, sys, time

def main(spec_path):
    with open(spec_path, "rb") as fh:
        spec = marshal.load(fh)
    os.unlink(spec_path)  # it holds the agent's key: gone before the agent starts
    argv, env, cwd = spec["command"], spec["env"], spec["cwd"]
    log = open(spec["log"], "ab", buffering=0)
    stop = []

    def forward(signum, frame):
        stop.append(signum)

    for sig in (signal.SIGTERM, signal.SIGHUP, signal.SIGINT):
        signal.signal(sig, forward)
    code = run_pty(spec, argv, env, cwd, log, stop)
    # The pane's own status is the agent's too (as the shell wrapper's `exit "$c"`).
    if not still_ours(log, spec["log"]):
        return code  # killed, and a new session of the name has started on a log of its own
    tmp = spec["exit"] + ".tmp"
    with open(tmp, "w", encoding="utf-8") as fh:
        fh.write(str(code))
    os.replace(tmp, spec["exit"])
    if not still_ours(log, spec["log"]):  # the new one started just as this was written
        try:
            os.unlink(spec["exit"])
        except OSError:
            pass
        return code
    said_ended(spec.get("ended"))
    return code

def still_ours(log, path):
    """Whether the log at `path` is still the file this session writes (a new session of the
    name always starts on a new file)."""
    try:
        now = os.stat(path)
    except OSError:
        return False
    mine = os.fstat(log.fileno())
    return (now.st_dev, now.st_ino) == (mine.st_dev, mine.st_ino)

def said_ended(path):
    """Tell a host waiting on the named pipe `path` that the session ended: opening it for
    writing and closing it wakes the reader. Nobody reading (or no pipe) is no error."""
    if not path:
        return
    try:
        os.close(os.open(path, os.O_WRONLY | os.O_NONBLOCK))
    except OSError:
        pass

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

def wakeup_pipe():
    """A pipe a stop signal writes to, so a wait can sleep until the child ends or a signal."""
    read, write = os.pipe()
    os.set_blocking(write, False)
    signal.set_wakeup_fd(write)
    return read

def wait_child(pid, stop, deadline=None):
    try:
        ended = os.pidfd_open(pid)  # readable once the child has ended: no polling
        woken = wakeup_pipe()
    except (AttributeError, OSError):
        ended = woken = None
    while True:
        got, status = os.waitpid(pid, os.WNOHANG)
        if got:
            return code_of(status)
        deadline = signal_child(pid, stop, deadline)
        if ended is None:
            time.sleep(0.02)
            continue
        timeout = None if deadline is None else max(deadline - time.monotonic(), 0.0) + 0.01
        ready, _, _ = select.select([ended, woken], [], [], timeout)
        if woken in ready:
            os.read(woken, 512)

def copy_winsize(dst):
    import fcntl, termios
    try:
        size = fcntl.ioctl(0, termios.TIOCGWINSZ, b"\0" * 8)
        fcntl.ioctl(dst, termios.TIOCSWINSZ, size)
    except OSError:
        pass

def run_pty(spec, argv, env, cwd, log, stop):
    import termios, tty
    devnull = spec["stdin_devnull"]
    pid, master = os.forkpty()
    if pid == 0:
        try:
            os.chdir(cwd)
            if devnull:
                os.dup2(os.open(os.devnull, os.O_RDONLY), 0)
            for sig in (signal.SIGPIPE, signal.SIGXFSZ):  # Python ignores them; exec keeps that
                signal.signal(sig, signal.SIG_DFL)
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

sys.exit(main(sys.argv[1]))
'''


def _write_wrapper(directory: Path) -> Path:
    """The wrapper, compiled for this interpreter (`sys.executable` runs it): Python compiles
    a script given as source at every start, which was a fifth of the wrapper's own time, and
    runs a compiled file as it is. Its header names the interpreter's bytecode version and the
    source's hash, so a file another Python or another version of the harness wrote is
    written again."""
    tag = sys.implementation.cache_tag or sys.implementation.name
    path = directory / f".agent-harness-session-wrapper.{tag}.pyc"
    source = WRAPPER_SOURCE.encode("utf-8")
    # PEP 552: the magic number, flags (1: the source's hash follows, not to be checked
    # against any file), the hash; then the code object.
    header = importlib.util.MAGIC_NUMBER + (1).to_bytes(4, "little")
    header += importlib.util.source_hash(source)
    try:
        with open(path, "rb") as fh:
            current = fh.read(len(header)) == header
    except OSError:
        current = False
    if not current:
        code = compile(source, ".agent-harness-session-wrapper.py", "exec", dont_inherit=True)
        # Workers starting sessions at once may all write it: each to a file of its own.
        tmp = path.with_name(f"{path.name}.{os.getpid()}.{threading.get_ident()}.tmp")
        tmp.write_bytes(header + marshal.dumps(code))
        tmp.replace(path)
    return path


def _exit_path(log_path: Path) -> Path:
    return log_path.with_name(log_path.name + ".exit")


# The shell wrapper's last words on the terminal, after the agent's: an operating-system
# command no terminal acts on (tmux ignores one it does not know, so nothing shows). Once it is
# in the log, everything the agent wrote is there too, since tmux copies the terminal's bytes
# in order. The log is never rewritten (something the agent left running may still append to
# it); whoever reads it leaves the mark out (`read_log`).
END_MARK = b"\x1b]agent-harness;session-ended\x07"
# How long after the shell wrapper recorded the agent's exit its log may still be on its way.
# The end mark ends the wait as soon as it arrives, so only a copy that lost it waits this long;
# on a loaded machine tmux's copy has lagged the terminal by more than a second.
LOG_SETTLE_S = 5.0
# How many looks (the first QUICK_LOOKS 2 ms apart, the rest a hundredth of a second) the shell
# wrapper gives tmux's copy to bring the end mark into the log before it lets the pane close.
MARK_WAIT_LOOKS = 200
QUICK_LOOKS = 5  # the first looks, 2 ms apart (the rest 10 ms)
_SHELL_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")
# Names a shell keeps for itself: bash (which is /bin/sh on some systems) refuses to export
# them, and the script would end before the agent started.
_SHELL_OWN = frozenset(
    {"UID", "EUID", "PPID", "SHELLOPTS", "BASHOPTS", "BASH_VERSINFO", "GROUPS", "BASHPID"}
)


def shell_can_export(env: Mapping[str, str]) -> bool:
    """Whether a POSIX shell can hand exactly `env` on: every name a shell name the shell does
    not keep for itself, every value text (a value that is not UTF-8 goes through Python)."""
    for name, value in env.items():
        if not _SHELL_NAME.match(name) or name in _SHELL_OWN:
            return False
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            return False
    return True


def _said_path(log_path: Path) -> Path:
    """Where the shell wrapper records the exit code; it becomes the exit file once the log
    has caught up (`settled_exit`)."""
    return log_path.with_name(log_path.name + ".said")


def shell_wrapper_path(log_path: Path, name: str) -> Path:
    """Where session `name`'s shell script is written, beside its log."""
    return log_path.parent / f".{name}.sh"


def write_shell_wrapper(spec: SessionSpec, ended: Path | None) -> Path:
    """The session's shell script, readable only by us. It deletes itself first (it holds the
    agent's environment, keys included), enters the worktree (or ends with 127), exports
    exactly that environment, runs the agent in the foreground on the pane's terminal, and
    then writes the end mark, waits for tmux to copy it into the log, writes the exit code
    (128 + N for a signal) and opens the named pipe `ended` (a host waiting on it wakes). A
    stop signal is only noted (a trap, which the agent does not inherit, where ignoring it
    would be).

    Needs `shell_can_export(spec.env)`."""
    q = shlex.quote
    argv, cwd = spec.command, str(spec.cwd)
    octal_mark = "".join(f"\\{byte:03o}" for byte in END_MARK)  # its bytes, as printf writes
    lines = [
        # rm where POSIX systems keep it; where it is elsewhere, found on the agent's PATH
        # below, and the host removes what is left when the session ends.
        'PATH=/usr/bin:/bin rm -f -- "$0" 2>/dev/null',
        "_ah_stop=; trap '_ah_stop=1' HUP INT TERM",
        f"if cd -- {q(cwd)} 2>/dev/null; then",
        "unset PWD OLDPWD",  # the shell's own; the agent's, if it has them, are exported below
        *(f"export {name}={q(value)}" for name, value in spec.env.items()),
        '[ -e "$0" ] && rm -f -- "$0"',
    ]
    if spec.stdin_devnull:
        lines.append("exec </dev/null")
    lines += [
        f"if command -v {q(argv[0])} >/dev/null 2>&1; then {shlex.join(argv)}",
        f"else printf 'cannot start %s: no such program\\n' {q(argv[0])}; (exit 127); fi",
        f"else printf 'cannot start %s: cannot enter %s\\n' {q(argv[0])} {q(cwd)}; (exit 127); fi",
        "c=$?",
        f"printf '{octal_mark}'",
        # The pane stays until tmux has copied the mark into the log: on a loaded machine, a
        # program that ended the moment it wrote lost what tmux had not yet read of its
        # terminal (the log stopped at 4,095 bytes for good). Looked for every 2 ms for the
        # first QUICK_LOOKS looks (tmux copies it in a millisecond or two, and every item
        # waits for that look), then every hundredth of a second, for at most
        # MARK_WAIT_LOOKS looks; not at all once a stop signal came (the session is being
        # killed, tmux has died, or the copy ended).
        # (Its names are unlikely ones: the agent's environment, exported above, is in scope.)
        # A look is one process (`tail`): the mark is matched by the shell itself, and its
        # bytes are in the script as they are. (The braces keep a shell's complaint about a NUL
        # in what `tail` read, bash's, off the agent's terminal.)
        f"_ah_path=\"/usr/bin:/bin:$PATH\"; _ah_n=0; _ah_mark='{END_MARK.decode('ascii')}'",
        f'while [ -z "$_ah_stop" ] && [ $_ah_n -lt {MARK_WAIT_LOOKS} ]; do '
        "{ _ah_tail=$(PATH=$_ah_path tail -c 512 -- "
        f'{q(str(spec.log_path))}); }} 2>/dev/null; case $_ah_tail in *"$_ah_mark"*) break;; '
        f"esac; _ah_wait=0.01; [ $_ah_n -lt {QUICK_LOOKS} ] && _ah_wait=0.002; "
        "PATH=$_ah_path sleep $_ah_wait 2>/dev/null; _ah_n=$((_ah_n+1)); done",
        f'printf %s "$c" > {q(str(_said_path(spec.log_path)))}',
    ]
    if ended is not None:
        lines.append(f"[ -p {q(str(ended))} ] && : <> {q(str(ended))}")
    # The pane's own exit status is the agent's too, for a host that finds no file to read it
    # from (the log's directory could not be written).
    lines.append('exit "$c"')
    path = shell_wrapper_path(spec.log_path, spec.name)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as fh:
        fh.write("\n".join(lines) + "\n")
    return path


def settled_exit(log_path: Path, waited: float | None = None) -> int | None:
    """The exit code the shell wrapper recorded, once everything the agent wrote is in the log
    (its end mark is, or `LOG_SETTLE_S` has passed: output written after the agent ended, by
    something it left running, or a copy that failed); None before. The code is then moved to
    the exit file, which says both for every later look. `waited`: how long the caller has
    known of the recorded exit, on a clock nobody sets; without it, the file's own time says
    (a wall clock set forward would end the wait early).

    A pane tmux reports dead is no sign the log is complete: tmux has read the terminal, but
    its copy (`pipe-pane`) reaches the log through another process, on its own time."""
    said = _said_path(log_path)
    code = _read_exit(said)
    if code is None:
        return None
    if not _has_end_mark(log_path):
        try:
            if _settling(said, waited):
                return None
        except FileNotFoundError:  # another look settled it in between
            return _read_exit(_exit_path(log_path))
    with contextlib.suppress(FileNotFoundError):  # another look settled it in between
        said.replace(_exit_path(log_path))
    return code


def exit_unsettled(log_path: Path, waited: float | None = None) -> bool:
    """Whether the shell wrapper recorded an exit less than `LOG_SETTLE_S` ago (see
    `settled_exit` for `waited`) whose output may still be on its way to the log. Past that,
    whatever it wrote (even a file it could not finish, on a full disk) no longer holds the
    end back."""
    try:
        return _settling(_said_path(log_path), waited)
    except FileNotFoundError:
        return False


def exit_recorded(log_path: Path) -> bool:
    """Whether the shell wrapper has recorded an exit not yet settled (whatever it holds)."""
    return _said_path(log_path).exists()


def _settling(said: Path, waited: float | None) -> bool:
    if waited is not None:
        said.stat()  # FileNotFoundError when there is none
        return waited < LOG_SETTLE_S
    return time.time() - said.stat().st_mtime < LOG_SETTLE_S


def recorded_exit(log_path: Path) -> int | None:
    """The exit code the wrappers recorded, settled or not: for a session that is gone, whose
    log will get nothing more."""
    code = _read_exit(_exit_path(log_path))
    return code if code is not None else _read_exit(_said_path(log_path))


def _has_end_mark(log_path: Path) -> bool:
    """Whether the end mark is in the log's last few kilobytes."""
    try:
        with open(log_path, "rb") as fh:
            size = fh.seek(0, os.SEEK_END)
            fh.seek(max(size - 4096, 0))
            return END_MARK in fh.read()
    except FileNotFoundError:
        return False


def read_log(path: Path) -> str:
    """A session's log as text, without the shell wrapper's end mark."""
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return ""
    return data.replace(END_MARK, b"").decode("utf-8", errors="replace")


def _read_exit(exit_path: Path) -> int | None:
    try:
        return int(exit_path.read_text(encoding="utf-8").strip())
    except (OSError, ValueError):  # none yet, or none that reads (a full disk, a directory)
        return None


def _write_spec(spec: SessionSpec, ended: Path | None = None) -> Path:
    """The wrapper's instructions, readable only by us; the wrapper deletes it on start."""
    path = spec.log_path.parent / f".{spec.name}.spec"
    payload = {
        "command": spec.command,
        "env": spec.env,
        "cwd": str(spec.cwd),
        "log": str(spec.log_path),
        "exit": str(_exit_path(spec.log_path)),
        "stdin_devnull": spec.stdin_devnull,
        "ended": str(ended) if ended else None,
    }
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "wb") as fh:
        marshal.dump(payload, fh)
    return path


def _prepare_log(spec: SessionSpec) -> None:
    # The agent's terminal, as it was: what it printed of a key it was given among it. Its
    # owner's alone, as the key is (it was 0644, in a folder anyone could list).
    logs = spec.log_path.parent
    logs.mkdir(parents=True, exist_ok=True, mode=0o700)
    os.chmod(logs, 0o700)  # one an earlier version made
    _keep_earlier_log(spec.log_path)
    # A new session starts a new log: a new file, not an empty one emptied again, since a
    # session of the name killed a moment ago may still hold it open (a pane's copy, the
    # Python wrapper) and must write nothing into this one's. (A live session's log is never
    # here: the hosts look for a session that may still run before they prepare its log, and
    # the item's lease keeps a second process from starting the name at the same moment.)
    spec.log_path.unlink(missing_ok=True)
    os.close(os.open(spec.log_path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600))
    _exit_path(spec.log_path).unlink(missing_ok=True)
    _said_path(spec.log_path).unlink(missing_ok=True)


KEPT_LOGS = 20  # earlier logs kept per session name


def _keep_earlier_log(log: Path) -> None:
    """An earlier session of the same name (an item's attempt before, a pull-request round)
    left its log: it is kept beside, as `<name>.1.log`, `<name>.2.log`…, never written over."""
    try:
        if log.stat().st_size == 0:
            return
    except FileNotFoundError:
        return
    for n in range(1, 1_000_000):
        kept = log.with_name(f"{log.stem}.{n}{log.suffix}")
        if not kept.exists():
            log.rename(kept)
            # The latest KEPT_LOGS are kept: an item sent back round after round does not
            # fill the disk with its agent's old output.
            log.with_name(f"{log.stem}.{n - KEPT_LOGS}{log.suffix}").unlink(missing_ok=True)
            return


def _tail_lines(text: str, lines: int) -> str:
    # Trailing spaces dropped, as tmux's capture-pane does, so screens compare alike.
    rows = [row.rstrip() for row in text.replace("\r\n", "\n").replace("\r", "\n").split("\n")]
    while rows and not rows[-1]:
        rows.pop()
    return "\n".join(rows[-lines:]) if lines > 0 else ""
