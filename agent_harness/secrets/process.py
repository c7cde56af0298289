"""Keeping the harness's own credentials out of reach of the agents it starts.

Any process of the same user can read another's `/proc/<pid>/environ` (on macOS, `ps eww`),
and that file shows the environment the process was *started* with: deleting a variable from
`os.environ` later changes nothing there. So the entry point re-executes itself once with the
credentials removed from its environment, handing their values to the new image through a pipe
that is closed as soon as it is read; from then on they live only in this module's memory.
A credential given as an argument (a database URL with its password) goes the same way, and
the new image's command line, which every user can read, shows it masked.
On Linux the process is also marked non-dumpable, which closes `/proc/<pid>/mem` and
`environ` to processes of the same user (root can still read everything).
"""

from __future__ import annotations

import json
import os
import sys

from agent_harness.errors import HarnessError
from agent_harness.secrets.shapes import (
    ALWAYS_SECRET,
    PROXY_NAMES,
    SECRET_NAME,
    mask_url,
    value_looks_secret,
)

# Names the pipe's descriptor to the re-executed image; it is no secret itself.
SEAL_FD = "AGENT_HARNESS_SEALED_FD"
_PR_SET_DUMPABLE = 4
_PIPE_BYTES = 1 << 20

# What the process was started with and no longer keeps in its environment. Process-wide on
# purpose, exactly as os.environ is: it is the part of the environment held in memory only.
_held: dict[str, str] = {}


class SecretsError(HarnessError):
    """The harness could not put its credentials out of other processes' reach."""

    exit_code = 2


def should_seal(name: str, value: str) -> bool:
    """A variable to move out of the process environment: a credential by name or by shape.

    Proxy settings stay, because the HTTP libraries read them from the environment themselves.
    """
    if name in PROXY_NAMES or name == SEAL_FD:
        return False
    return (
        name in ALWAYS_SECRET or bool(SECRET_NAME.search(name)) or bool(value_looks_secret(value))
    )


def seal_process() -> None:
    """Call first thing in a command-line entry point; may replace the process image.

    On the first pass the credentials found in the environment are written to a pipe and the
    same command is executed again without them. On the second pass (or when there were none)
    they are read back into memory, and the process is made non-dumpable where that exists.
    """
    inherited = os.environ.pop(SEAL_FD, None)
    if inherited is not None:
        received = _receive(inherited)
        _restore_arguments(received.pop(_ARGV_KEY, None))
        _held.update(received)
    elif os.name == "posix" and sys.executable:
        moving = {name: value for name, value in os.environ.items() if should_seal(name, value)}
        argv = list(getattr(sys, "orig_argv", None) or [sys.executable, *sys.argv])
        shown = [shown_argument(arg, after=argv[i - 1] if i else "") for i, arg in enumerate(argv)]
        # A credential in an argument (`--db postgresql://u:PASSWORD@…`) is in the command
        # line, which every process on the machine can read (`ps`, `/proc/<pid>/cmdline`):
        # it is handed over with the environment's, and the new image shows it masked.
        hidden = {str(i - len(argv)): arg for i, arg in enumerate(argv) if shown[i] != arg}
        if hidden:
            moving[_ARGV_KEY] = json.dumps(hidden)
        if moving:
            _reexecute_without(moving, shown)  # returns only when it could not
    harden()


# The hand-over's entry for arguments holding a credential: their places, counted from the end
# of the command line (the interpreter's own arguments before them may be written otherwise).
_ARGV_KEY = "\0argv"


# Options whose value is a credential whatever it looks like (`forge serve`'s tokens; a
# collaborator's `LOGIN=TOKEN`, whose token is after the `=`).
SECRET_OPTIONS = ("--token", "--read-only-token")
_SECRET_PAIR_OPTIONS = ("--collaborator",)


def shown_argument(arg: str, *, after: str = "") -> str:
    """A command-line argument as other processes may see it: the value of an option that
    always holds a credential (`after` is the argument before it), a URL's password, a
    libpq `password=`, a token-shaped value (alone or after `--option=`) masked."""
    option, sep, value = arg.partition("=") if arg.startswith("--") else ("", "", arg)
    if after in SECRET_OPTIONS or option in SECRET_OPTIONS:
        return f"{option}{sep}***"
    if after in _SECRET_PAIR_OPTIONS or option in _SECRET_PAIR_OPTIONS:
        login, eq, _token = value.partition("=")
        return f"{option}{sep}{login}{eq}***" if eq else arg
    masked = mask_url(arg)
    if masked != arg:
        return masked
    if value_looks_secret(value):
        return f"{option}{sep}***"
    return arg


def _restore_arguments(hidden: str | None) -> None:
    """Put the arguments the first image masked back into `sys.argv` (memory only)."""
    if not hidden:
        return
    for place, arg in json.loads(hidden).items():
        index = len(sys.argv) + int(place)
        if 0 < index < len(sys.argv):
            sys.argv[index] = arg


def _reexecute_without(moving: dict[str, str], argv: list[str]) -> None:
    payload = json.dumps(moving).encode("utf-8")
    read_end, write_end = os.pipe()
    try:
        _grow_pipe(write_end, len(payload))
        os.set_blocking(write_end, False)
        try:
            written = os.write(write_end, payload)
        except BlockingIOError:
            written = 0
    finally:
        os.close(write_end)
    if written < len(payload):
        os.close(read_end)
        raise SecretsError(
            f"the credential variables in the environment ({len(payload)} bytes) do not fit "
            "the hand-over pipe; unset the ones this command does not need"
        )
    os.set_inheritable(read_end, True)
    env = {name: value for name, value in os.environ.items() if name not in moving}
    env[SEAL_FD] = str(read_end)
    try:
        os.execve(sys.executable, argv, env)
    except OSError as exc:
        os.close(read_end)
        raise SecretsError(
            f"could not restart without credentials in the environment: {exc.strerror or exc}"
        ) from None


def _grow_pipe(fd: int, needed: int) -> None:
    import contextlib
    import fcntl

    set_size = getattr(fcntl, "F_SETPIPE_SZ", None)  # Linux; macOS pipes grow by themselves
    if set_size is not None and needed > 16384:
        with contextlib.suppress(OSError):  # the write that follows says whether it fitted
            fcntl.fcntl(fd, set_size, min(max(needed, 65536), _PIPE_BYTES))


def _receive(fd_text: str) -> dict[str, str]:
    try:
        fd = int(fd_text)
        chunks = []
        while chunk := os.read(fd, 65536):
            chunks.append(chunk)
        os.close(fd)
        data = json.loads(b"".join(chunks) or b"{}")
    except (ValueError, OSError) as exc:
        raise SecretsError(
            f"could not read the credentials handed over at restart: {exc}"
        ) from None
    if not isinstance(data, dict):
        raise SecretsError("the credentials handed over at restart are not a mapping")
    return {str(name): str(value) for name, value in data.items()}


def harden() -> bool:
    """Close this process to same-user readers of its memory and environment (Linux only).

    Returns whether the kernel took it. Child processes are not affected: exec makes a process
    dumpable again.
    """
    if not sys.platform.startswith("linux"):
        return False
    import ctypes

    try:
        libc = ctypes.CDLL(None, use_errno=True)
        return int(libc.prctl(_PR_SET_DUMPABLE, 0, 0, 0, 0)) == 0
    except (OSError, AttributeError):
        return False


def process_env() -> dict[str, str]:
    """The environment this process was started with: os.environ plus the credentials moved out
    of it. Read settings and hand environments on from this, never from os.environ alone."""
    env = dict(os.environ)
    env.update(_held)
    return env


def held_names() -> tuple[str, ...]:
    """Names of the variables kept in memory instead of the process environment."""
    return tuple(sorted(_held))
