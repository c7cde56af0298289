"""Rules every test lives by (exactly one tier, and a unit tier that cannot reach outside),
and the fixtures tests in several packages share.

The tiers (registered in pyproject.toml) say what a test is allowed to touch:

- ``unit``: this process only: no subprocess, no socket. ``pytest -m unit`` is the inner loop.
- ``integration``: real git in temporary directories, loopback HTTP, SQLite files, PostgreSQL.
- ``acceptance``: the CLI as a subprocess, kill tests, npm-installed agent CLIs, tmux.

A tier is chosen per file (``pytestmark``), per test, or per parameter
(``pytest.param(..., marks=...)``); a test that ends up with none, or with two, stops the
collection so the choice is made when the test is written rather than discovered later.
"""

from __future__ import annotations

import contextlib
import os
import socket
import subprocess
import sys
from collections.abc import Generator, Iterator
from typing import Any

import pytest

from agent_harness.git.runner import LOCAL_REPO_ENV
from agent_harness.testing.clock import FakeClock

# The suite starts hundreds of Python processes (the CLI, runs, servers, agents' wrappers).
# Under PYTHONDONTWRITEBYTECODE each would compile every module it imports from source again
# (collection alone took 11 s instead of 5 s per worker), so the tests keep bytecode whatever
# the shell says. Nothing tested depends on it; __pycache__ is ignored by git.
os.environ.pop("PYTHONDONTWRITEBYTECODE", None)
# Run under `git bisect run` (or from a hook), the suite inherited GIT_DIR: every `git init`,
# `git config` and worktree of its tests then went to the developer's own repository (made
# bare, its user and origin rewritten). A test's git works where it is told, nowhere else.
for _name in LOCAL_REPO_ENV:
    os.environ.pop(_name, None)
sys.dont_write_bytecode = False

# Checks and agents in the tests say `python`, as a person's plan does. A fresh Debian or Ubuntu
# has only `python3` on PATH; the tests' own interpreter (the venv's, which has a `python`) goes
# first, as activating the venv would put it.
os.environ["PATH"] = os.pathsep.join(
    [os.path.dirname(sys.executable), *filter(None, [os.environ.get("PATH")])]
)

# Fixtures that tests in several packages share.
pytest_plugins = ("tests.shared.stores", "tests.shared.sessions")

TIERS = ("unit", "integration", "acceptance")


def pytest_xdist_auto_num_workers(config: pytest.Config) -> int:
    """How many workers `-n auto` (the default, in pyproject.toml) starts.

    The unit tier alone (`-m unit`) runs in this process: each worker collects the whole suite
    again (7 s of CPU apiece on a slow machine), more than its 1,200 quick tests take, so on
    2 cores three workers took 45 s where one process took 29. Everything else gets three: most
    of those tests wait (on a child, a lease, a timeout), and a third worker fills the waits.
    """
    return 0 if (config.option.markexpr or "").strip() == "unit" else 3


@pytest.fixture
def clock() -> FakeClock:
    """The suite's fake clock: still until the test moves it."""
    return FakeClock()


def tiers_of(item: pytest.Item) -> list[str]:
    return sorted({mark.name for mark in item.iter_markers() if mark.name in TIERS})


# tryfirst: the check has to see every test, before `-m` deselects any of them.
@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    wrong = []
    for item in items:
        found = tiers_of(item)
        if len(found) != 1:
            what = "no tier marker" if not found else "more than one tier: " + ", ".join(found)
            wrong.append(f"  {item.nodeid}: {what}")
    if wrong:
        raise pytest.UsageError(
            "every test needs exactly one of the markers "
            + ", ".join(TIERS)
            + " (see AGENTS.md, 'Set up, test, lint'); these do not:\n"
            + "\n".join(wrong)
        )


class UnitTierViolation(BaseException):
    """Raised when a unit test reaches outside the process.

    A BaseException, so that library code which classifies `Exception`s (a crashed
    handler, a failed check) cannot turn the broken rule into an ordinary test outcome.
    """


class _Guard:
    """Makes starting a process or opening a socket fail while a unit test runs."""

    def __init__(self, nodeid: str) -> None:
        self.nodeid = nodeid
        self.broken: list[str] = []

    def _refuse(self, what: str) -> UnitTierViolation:
        message = (
            f"{self.nodeid} is marked unit, and unit tests {what}; "
            "mark it integration or acceptance instead (see tests/conftest.py)"
        )
        self.broken.append(message)
        return UnitTierViolation(message)

    def __enter__(self) -> _Guard:
        guard = self
        self._popen_init = subprocess.Popen.__init__
        self._socket_init = socket.socket.__init__

        def no_process(popen: subprocess.Popen[Any], args: Any, *rest: Any, **kw: Any) -> None:
            raise guard._refuse(f"start no subprocess (this one was {args!r})")

        def no_socket(sock: socket.socket, *args: Any, **kw: Any) -> None:
            raise guard._refuse("open no socket")

        subprocess.Popen.__init__ = no_process
        socket.socket.__init__ = no_socket
        return self

    def __exit__(self, *exc: object) -> None:
        subprocess.Popen.__init__ = self._popen_init
        socket.socket.__init__ = self._socket_init


@contextlib.contextmanager
def unit_guard(item: pytest.Item) -> Iterator[None]:
    if "unit" not in tiers_of(item):
        yield
        return
    with _Guard(item.nodeid) as guard:
        yield
    # A refusal raised in a worker thread, or swallowed by the code under test, still
    # fails the test here.
    if guard.broken:
        pytest.fail(guard.broken[0], pytrace=False)


# Setup is guarded as well as the call: a wider-scoped fixture that a unit test is the
# first to need starts its servers there.
@pytest.hookimpl(wrapper=True)
def pytest_runtest_setup(item: pytest.Item) -> Generator[None, None, None]:
    with unit_guard(item):
        return (yield)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item: pytest.Item) -> Generator[None, None, None]:
    with unit_guard(item):
        return (yield)
