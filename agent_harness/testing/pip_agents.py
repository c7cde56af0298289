"""Pinned agent CLIs published on PyPI (aider), installed into a virtualenv of their own, once,
by uv where it is installed (else, or where uv cannot reach an index, by pip).

The twin of `npm_agents`: each package==version gets a venv under the same cache root, made where
it will live (a venv's scripts name their own path) and marked complete only when pip finished,
so a half-made venv is made again. Processes that install at once (test workers) take turns
through a lock file beside it: a venv cannot be made aside and renamed into place. When pip or
its index cannot be reached, `PipUnavailable` says why, so tests can skip with that reason
instead of passing.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path

from agent_harness.errors import HarnessError
from agent_harness.testing.npm_agents import cache_root


@dataclass(frozen=True)
class PipAgent:
    """One agent CLI as PyPI publishes it."""

    package: str
    version: str
    binary: str

    @property
    def dirname(self) -> str:
        return f"pip-{self.package}=={self.version}"


# Versions tried against the scripted provider (see docs/REAL-AGENTS.md).
PINNED: Mapping[str, PipAgent] = {"aider": PipAgent("aider-chat", "0.86.2", "aider")}


COMPLETE = ".agent-harness-complete"


class PipUnavailable(HarnessError):
    """pip could not install the agent CLI."""

    def __init__(self, spec: str, why: str) -> None:
        self.spec = spec
        self.why = why
        super().__init__(f"cannot install {spec} with pip: {why}")


def installed_bin(agent: PipAgent, root: Path) -> Path | None:
    """The venv's `bin` directory when a complete install is cached."""
    bin_dir = root / agent.dirname / "bin"
    done = (root / agent.dirname / COMPLETE).exists()
    return bin_dir if done and (bin_dir / agent.binary).exists() else None


def install(
    agent: PipAgent, root: Path, *, env: Mapping[str, str], timeout_s: float = 900.0
) -> Path:
    """The bin directory holding `agent.binary`, installing it into a fresh venv if needed."""
    found = installed_bin(agent, root)
    if found is not None:
        return found
    root.mkdir(parents=True, exist_ok=True)
    failed = root / f".{agent.dirname}.failed"
    started = time.time()
    with _turn(root / f".{agent.dirname}.lock"):
        found = installed_bin(agent, root)  # another process installed it while we waited
        if found is not None:
            return found
        # One that failed while we waited says why, instead of every waiter trying in turn.
        with contextlib.suppress(OSError):
            if failed.stat().st_mtime >= started:
                raise PipUnavailable(
                    f"{agent.package}=={agent.version}", failed.read_text(encoding="utf-8")
                )
        try:
            return _install(agent, root, env, timeout_s)
        except PipUnavailable as exc:
            with contextlib.suppress(OSError):
                failed.write_text(exc.why, encoding="utf-8")
            raise


@contextlib.contextmanager
def _turn(lock_path: Path) -> Iterator[None]:
    """Hold an exclusive lock on `lock_path` (released when the process ends, however)."""
    with open(lock_path, "a", encoding="utf-8") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def _install(agent: PipAgent, root: Path, env: Mapping[str, str], timeout_s: float) -> Path:
    spec = f"{agent.package}=={agent.version}"
    target = root / agent.dirname
    uv = _uv()
    deadline = time.monotonic() + timeout_s  # for both tries together
    try:
        if uv is None:
            _install_into(target, _with_pip(target, spec), spec, env, deadline)
        else:
            try:
                _install_into(target, _with_uv(uv, target, spec), spec, env, deadline)
            except PipUnavailable as by_uv:  # uv reads no pip.conf: pip may reach an index
                try:
                    _install_into(target, _with_pip(target, spec), spec, env, deadline)
                except PipUnavailable as by_pip:
                    raise PipUnavailable(spec, f"{by_pip.why} (uv: {by_uv.why})") from None
        if not (target / "bin" / agent.binary).exists():
            raise PipUnavailable(spec, f"the package installed no `{agent.binary}` program")
    except PipUnavailable:
        shutil.rmtree(target, ignore_errors=True)
        raise
    (target / COMPLETE).write_text(spec + "\n", encoding="utf-8")
    found = installed_bin(agent, root)
    assert found is not None
    return found


def _uv() -> str | None:
    """uv's program, where it is installed (the dev extras bring it). It makes the venv and
    installs aider's hundred-odd packages in 10 s, where pip took 42 s here, and 90 s beside
    a running test suite on 2 cores."""
    try:
        from uv import find_uv_bin
    except ImportError:
        return shutil.which("uv")
    try:
        return find_uv_bin()
    except FileNotFoundError:
        return None


def _with_uv(uv: str, target: Path, spec: str) -> list[list[str]]:
    python = str(target / "bin" / "python")
    return [
        # --seed: pip in the venv too, for aider's own installs of its extras.
        [uv, "venv", "--quiet", "--seed", "--python", sys.executable, str(target)],
        # Compiled at install, on every core: left to aider's first run, the compiling (on
        # one core, of what it imports) made that run 22 s slower; here it adds 8 s.
        [uv, "pip", "install", "--quiet", "--compile-bytecode", "--python", python, spec],
    ]


def _with_pip(target: Path, spec: str) -> list[list[str]]:
    python = str(target / "bin" / "python")
    return [
        [sys.executable, "-m", "venv", "--clear", str(target)],
        [python, "-m", "pip", "install", "-q", spec],
    ]


def _install_into(
    target: Path, steps: list[list[str]], spec: str, env: Mapping[str, str], deadline: float
) -> None:
    shutil.rmtree(target, ignore_errors=True)  # a venv an interrupted install left behind
    for argv in steps:
        left = deadline - time.monotonic()
        if left <= 0:
            raise PipUnavailable(spec, f"its time ran out before {Path(argv[0]).name} could run")
        _run(argv, spec, env, left)


def _run(argv: list[str], spec: str, env: Mapping[str, str], timeout_s: float) -> None:
    try:
        done = subprocess.run(
            argv,
            env=dict(env),
            capture_output=True,
            text=True,
            timeout=timeout_s,
            stdin=subprocess.DEVNULL,
        )
    except subprocess.TimeoutExpired:
        raise PipUnavailable(spec, f"{argv[0]} ran over {timeout_s:g}s") from None
    if done.returncode != 0:
        lines = [line for line in (done.stderr or done.stdout).splitlines() if line.strip()]
        errors = [line for line in lines if line.startswith("ERROR")] or lines[-2:]
        raise PipUnavailable(spec, " / ".join(errors)[:400] or "pip failed without a message")


def install_pinned(names: tuple[str, ...], env: Mapping[str, str] | None = None) -> list[Path]:
    """Bin directories for the named pinned PyPI agents (e.g. `("aider",)`)."""
    source = dict(os.environ if env is None else env)
    root = cache_root(source)
    return [install(PINNED[name], root, env=source) for name in names]
