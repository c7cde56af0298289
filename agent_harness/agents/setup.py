"""The environment and home a CLI agent runs with: its own key, a throwaway home, its config."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from agent_harness.agents.presets import AgentPreset


# Claude Code retries a plain 429 about ten times over minutes by default; the harness has its
# own retry and parking, so the CLI gets only a couple of quick ones.
CLAUDE_MAX_RETRIES = "2"


CODEX_PROVIDER = "agent_harness"


@dataclass(frozen=True)
class AgentSetup:
    """The environment an agent CLI runs with, and the extra names it may see."""

    env: dict[str, str]
    allow: tuple[str, ...] = ()
    preset: AgentPreset | None = None  # the preset adjusted for this run, when it needed to be


def agent_setup(
    preset: AgentPreset,
    home: Path,
    env_source: Mapping[str, str],
    *,
    model: str | None = None,
    own_login: bool = False,
) -> AgentSetup:
    """Give the agent a home of its own under `home` (never the user's, unless `own_login`).

    Claude Code keeps `~/.claude.json` and its settings in HOME; Codex keeps its config,
    login and sessions in CODEX_HOME, and is pointed at its endpoint by a provider entry in
    `config.toml` (it ignores OPENAI_BASE_URL), with its own retries off.
    """
    env = dict(env_source)
    allow: list[str] = []
    if not own_login:
        home.mkdir(parents=True, exist_ok=True)
        env["HOME"] = str(home)
    adjusted: AgentPreset | None = None
    if preset.name in ("claude", "gemini") and not preset.stdin_devnull:
        # Both take a stdin that is not a terminal (a headless session's pipe) as extra
        # input: claude -p waits 3 s for it, gemini -p reads it as context. Neither asks
        # anything in -p mode, so neither gets a stdin.
        adjusted = dataclasses.replace(preset, stdin_devnull=True)
    if preset.name == "claude":
        env["CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC"] = "1"
        env.setdefault("CLAUDE_CODE_MAX_RETRIES", CLAUDE_MAX_RETRIES)
        allow += ["CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC", "CLAUDE_CODE_MAX_RETRIES"]
    elif preset.name == "codex":
        codex_home = Path(env["CODEX_HOME"]) if own_login and env.get("CODEX_HOME") else None
        if codex_home is None and not own_login:
            codex_home = home / "codex"
            codex_home.mkdir(parents=True, exist_ok=True)
            (codex_home / "config.toml").write_text(
                codex_config(env.get("OPENAI_BASE_URL"), model), encoding="utf-8"
            )
        if codex_home is not None:
            env["CODEX_HOME"] = str(codex_home)
            allow.append("CODEX_HOME")
    return AgentSetup(env, tuple(allow), adjusted)


def codex_config(base_url: str | None, model: str | None) -> str:
    """A Codex `config.toml` using a provider of ours, so the endpoint is the one we chose."""

    def toml(value: str) -> str:
        return json.dumps(value)  # a JSON string is a valid TOML basic string

    lines = []
    if model:
        lines.append(f"model = {toml(model)}")
    lines += [
        f"model_provider = {toml(CODEX_PROVIDER)}",
        "",
        f"[model_providers.{CODEX_PROVIDER}]",
        'name = "agent-harness"',
        f"base_url = {toml(base_url or 'https://api.openai.com/v1')}",
        'wire_api = "responses"',
        'env_key = "OPENAI_API_KEY"',
        # A failed request is the harness's to classify and retry, not the CLI's to repeat.
        "request_max_retries = 0",
        "stream_max_retries = 0",
        "",
    ]
    return "\n".join(lines)
