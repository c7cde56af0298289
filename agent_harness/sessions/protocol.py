"""Where agent terminals live: a tmux server, plain background processes, or a remote host.

Every session runs behind a tiny wrapper program (Python under tmux, a POSIX shell headless),
which starts the agent with exactly the environment it was given, sends everything the agent
writes to the session's log file, and writes the exit code to a file beside that log. So status
and output never depend on the terminal multiplexer or on the process that started the session
still being alive.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

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
