"""Choosing a session host: tmux when it is installed, plain background processes otherwise."""

from __future__ import annotations

import shutil
from pathlib import Path

from agent_harness.sessions.headless import HeadlessHost
from agent_harness.sessions.protocol import SessionError, SessionHost
from agent_harness.sessions.tmux import TmuxHost

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
