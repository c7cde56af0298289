"""Choosing a session host: tmux when it is installed, plain background processes otherwise,
or a session host on another machine (`run --session-host URL`)."""

from __future__ import annotations

import shutil
from collections.abc import Mapping
from pathlib import Path

from agent_harness.secrets.redact import redact
from agent_harness.secrets.shapes import mask_url
from agent_harness.sessions.headless import HeadlessHost
from agent_harness.sessions.protocol import SessionError, SessionHost
from agent_harness.sessions.remote import RemoteSessionHost
from agent_harness.sessions.tmux import TmuxHost

HOST_KINDS = ("auto", "tmux", "headless")
# The bearer token of a remote session host: read from here by `run` and `attach`, never shown.
SESSION_TOKEN_ENV = "AGENT_HARNESS_SESSION_TOKEN"


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


class SessionHostRefused(SessionError):
    """The remote session host cannot be used as given (URL, token, or it does not answer)."""

    exit_code = 2


def remote_host(url: str, env: Mapping[str, str]) -> RemoteSessionHost:
    """The session host at `url` (its API: agent_harness.testing.session_server), with the
    token from AGENT_HARNESS_SESSION_TOKEN; asked once now, so a wrong URL or token stops the
    run before any work."""
    shown = mask_url(url)  # a password in the URL is never printed
    if not url.startswith(("http://", "https://")):
        raise SessionHostRefused(
            f"--session-host {shown}: give the host's URL, e.g. http://host:8765"
        )
    token = env.get(SESSION_TOKEN_ENV, "")
    if not token:
        raise SessionHostRefused(
            f"--session-host {shown} needs the host's bearer token in {SESSION_TOKEN_ENV}"
        )
    host = RemoteSessionHost(url, token)
    try:
        host.exists("agent-harness-probe")
    except SessionError as exc:
        host.close()
        raise SessionHostRefused(
            f"session host {shown} does not answer as one: {redact(exc.message)}"
        ) from None
    return host
