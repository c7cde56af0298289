"""Pinned agent CLIs (Claude Code, Codex) installed from npm into a cache directory, once.

Each package@version gets a prefix directory of its own, filled by `npm install --prefix` in a
scratch directory and renamed into place only when complete, so a finished directory is proof
of a finished install and a second call costs one `stat`. When npm or its registry cannot be
reached, `NpmUnavailable` says why, so tests can skip with that reason instead of passing.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from agent_harness.errors import HarnessError

CACHE_ENV = "AGENT_HARNESS_NPM_AGENTS"


@dataclass(frozen=True)
class NpmAgent:
    """One agent CLI as npm publishes it."""

    package: str
    version: str
    binary: str

    @property
    def spec(self) -> str:
        return f"{self.package}@{self.version}"

    @property
    def dirname(self) -> str:
        return self.spec.replace("/", "__")


# Versions tried against the scripted provider (see docs/REAL-AGENTS.md); move them together.
PINNED: Mapping[str, NpmAgent] = {
    "claude": NpmAgent("@anthropic-ai/claude-code", "2.1.332", "claude"),
    "codex": NpmAgent("@openai/codex", "0.171.0", "codex"),
    "gemini": NpmAgent("@google/gemini-cli", "0.61.0", "gemini"),
    "opencode": NpmAgent("opencode-ai", "1.18.33", "opencode"),
}


class NpmUnavailable(HarnessError):
    """npm could not install the agent CLI."""

    def __init__(self, spec: str, why: str) -> None:
        self.spec = spec
        self.why = why
        super().__init__(f"cannot install {spec} with npm: {why}")


def cache_root(env: Mapping[str, str]) -> Path:
    """`$AGENT_HARNESS_NPM_AGENTS`, else `$XDG_CACHE_HOME` or `~/.cache`, + agent-harness."""
    if env.get(CACHE_ENV):
        return Path(env[CACHE_ENV])
    base = Path(env["XDG_CACHE_HOME"]) if env.get("XDG_CACHE_HOME") else Path.home() / ".cache"
    return base / "agent-harness" / "npm-agents"


def installed_bin(agent: NpmAgent, root: Path) -> Path | None:
    """The agent's `node_modules/.bin` directory when a complete install is cached."""
    bin_dir = root / agent.dirname / "node_modules" / ".bin"
    return bin_dir if (bin_dir / agent.binary).exists() else None


def install(
    agent: NpmAgent,
    root: Path,
    *,
    env: Mapping[str, str],
    timeout_s: float = 900.0,
) -> Path:
    """The bin directory holding `agent.binary`, installing `agent.spec` first if needed."""
    found = installed_bin(agent, root)
    if found is not None:
        return found
    npm = shutil.which("npm", path=env.get("PATH"))
    if npm is None:
        raise NpmUnavailable(agent.spec, "npm is not on PATH (install Node.js)")
    root.mkdir(parents=True, exist_ok=True)
    scratch = Path(tempfile.mkdtemp(prefix=f".{agent.dirname}.", dir=root))
    try:
        try:
            done = subprocess.run(
                [npm, "install", "--prefix", str(scratch), "--no-audit", "--no-fund", agent.spec],
                env=dict(env),
                capture_output=True,
                text=True,
                timeout=timeout_s,
                stdin=subprocess.DEVNULL,
            )
        except subprocess.TimeoutExpired:
            raise NpmUnavailable(agent.spec, f"npm install ran over {timeout_s:g}s") from None
        if done.returncode != 0:
            raise NpmUnavailable(agent.spec, _npm_reason(done.stderr or done.stdout))
        if not (scratch / "node_modules" / ".bin" / agent.binary).exists():
            raise NpmUnavailable(agent.spec, f"the package installed no `{agent.binary}` program")
        try:
            scratch.rename(root / agent.dirname)
        except OSError:
            # Another process finished the same install first; theirs is as good as ours.
            if installed_bin(agent, root) is None:
                raise
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    found = installed_bin(agent, root)
    assert found is not None
    return found


def _npm_reason(output: str) -> str:
    """npm's own one-line error (`npm error code ENOTFOUND` ...), not its whole log."""
    lines = [line.strip() for line in output.splitlines() if line.strip()]
    errors = [line for line in lines if line.startswith(("npm error", "npm ERR!"))]
    picked = errors[:3] or lines[-2:] or ["npm install failed without a message"]
    return " / ".join(picked)[:400]


def install_pinned(names: tuple[str, ...], env: Mapping[str, str] | None = None) -> list[Path]:
    """Bin directories for the named pinned agents (e.g. `("claude", "codex")`)."""
    source = dict(os.environ if env is None else env)
    root = cache_root(source)
    return [install(PINNED[name], root, env=source) for name in names]
