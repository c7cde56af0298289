"""Every session host (tmux on a private socket, headless, remote over loopback) as fixtures.

Registered for the whole suite by tests/conftest.py: the session tests and the agent-run
tests both drive them.
"""

from __future__ import annotations

import os
import shutil
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from agent_harness.sessions.headless import HeadlessHost
from agent_harness.sessions.protocol import SessionHost
from agent_harness.sessions.remote import RemoteSessionHost
from agent_harness.sessions.tmux import TmuxHost
from agent_harness.testing.session_server import running_session_server

# A test taking `host` or `local_host` gets its tier from the parameter: driving tmux is
# acceptance, a headless process or the session server on loopback is integration.
TMUX = pytest.param("tmux", marks=pytest.mark.acceptance)
HEADLESS = pytest.param("headless", marks=pytest.mark.integration)
REMOTE = pytest.param("remote", marks=pytest.mark.integration)
HOST_KINDS = [TMUX, HEADLESS, REMOTE]
TOKEN = "test-session-token"
# Put before a command, it runs as a script's background job does: with SIGINT ignored (an
# ignored signal stays ignored across exec), deaf to Ctrl-C unless it takes SIGINT itself.
AS_A_SCRIPTS_BACKGROUND_JOB = ["/bin/sh", "-c", 'trap "" INT; exec "$@"', "sh"]


def wait_for(predicate: Callable[[], object], timeout: float = 10.0) -> None:
    """Poll until a real process has done something; fails the test if it never does."""
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError("condition not reached in time")
        time.sleep(0.02)


@pytest.fixture(scope="session")
def tmux_socket() -> Iterator[str]:
    if shutil.which("tmux") is None:
        pytest.skip("tmux is not on PATH (install tmux; .ci/run does)")
    socket = f"ah-test-{os.getpid()}"
    yield socket
    TmuxHost(socket_name=socket).kill_server()


@pytest.fixture
def tmux_host(tmux_socket: str) -> Iterator[TmuxHost]:
    host = TmuxHost(socket_name=tmux_socket)
    yield host
    listed = host._run("list-sessions", "-F", "#{session_name}", check=False)
    for name in listed.stdout.split():
        host.kill(name)


def logged_tmux(tmp_path: Path, socket: str) -> tuple[TmuxHost, Callable[[], list[str]]]:
    """A tmux host on `socket` whose every call to tmux is noted, and what reads the names of
    the commands it made so far, in order (each call is a process of its own: they are
    counted, never timed)."""
    calls = tmp_path / "tmux-calls"
    shim = tmp_path / "tmux"
    shim.write_text(f'#!/bin/sh\necho "$3" >> {calls}\nexec {shutil.which("tmux")} "$@"\n')
    shim.chmod(0o755)

    def made() -> list[str]:
        return calls.read_text().split() if calls.exists() else []

    return TmuxHost(socket_name=socket, tmux=str(shim)), made


@pytest.fixture
def name(request: pytest.FixtureRequest) -> str:
    """A session name unique to the test, so tests sharing a tmux server never collide."""
    return "t-" + request.node.name.replace("[", "-").replace("]", "")


@pytest.fixture
def state_dir(tmp_path: Path) -> Path:
    path = tmp_path / "state"
    path.mkdir()
    return path


def _kill_all(headless: HeadlessHost) -> None:
    """No test leaves an agent process behind, even when it fails half-way."""
    for record in sorted((headless.state_dir / "sessions").glob("*.json")):
        headless.kill(record.stem)


def _make_host(kind: str, request: pytest.FixtureRequest, state_dir: Path) -> Iterator[SessionHost]:
    if kind == "tmux":
        yield request.getfixturevalue("tmux_host")
    elif kind == "headless":
        headless = HeadlessHost(state_dir / "headless")
        yield headless
        _kill_all(headless)
    else:
        headless = HeadlessHost(state_dir / "remote")
        with running_session_server(headless, TOKEN) as server:
            client = RemoteSessionHost(server.url, TOKEN)
            yield client
            client.close()
        _kill_all(headless)


@pytest.fixture(params=HOST_KINDS)
def host(request: pytest.FixtureRequest, state_dir: Path) -> Iterator[SessionHost]:
    yield from _make_host(request.param, request, state_dir)


@pytest.fixture(params=[TMUX, HEADLESS])
def local_host(request: pytest.FixtureRequest, state_dir: Path) -> Iterator[SessionHost]:
    yield from _make_host(request.param, request, state_dir)


@pytest.fixture
def work(tmp_path: Path) -> Path:
    path = tmp_path / "work"
    path.mkdir()
    return path


@pytest.fixture
def agents_dir(tmp_path: Path) -> Path:
    return tmp_path / "agents"


def base_env() -> dict[str, str]:
    return {"PATH": os.environ.get("PATH", os.defpath), "LANG": "C.UTF-8"}
