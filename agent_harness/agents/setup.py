"""The environment and home a CLI agent runs with: its own key, a throwaway home, its config."""

from __future__ import annotations

import dataclasses
import errno
import hashlib
import json
import os
import shutil
import signal
import stat
import sys
import tempfile
import time
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
    model: str | None = None  # the model as this CLI must be told it


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
    `config.toml` (it ignores OPENAI_BASE_URL), with its own retries off. Gemini CLI gets a
    GEMINI_CLI_HOME with settings choosing key auth and one attempt per request; opencode its
    config in OPENCODE_CONFIG_CONTENT; aider its histories in a directory of the run's.
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
    elif preset.name == "gemini" and not own_login:
        allow += _gemini_home(env, home / "gemini")
    elif preset.name == "opencode":
        model = _opencode_model(model)
        allow += _opencode_config(env)
        if not own_login:
            _opencode_no_install(home / ".config" / "opencode")
    elif preset.name == "aider":
        model = _aider_model(env, model)
        allow += _aider_files(env, home / "aider")
    return AgentSetup(env, tuple(allow), adjusted, model)


# Gemini CLI retries a 429 ten times over minutes by default; one attempt leaves the limit to
# the harness, which classifies it (from the exit code) and parks the item.
GEMINI_MAX_ATTEMPTS = 1


def _gemini_home(env: dict[str, str], gemini_home: Path) -> list[str]:
    """A private GEMINI_CLI_HOME whose settings select key auth: with a custom endpoint alone
    Gemini CLI picks "gateway" auth, which headless mode refuses (exit 41)."""
    vertex = env.get("GOOGLE_GENAI_USE_VERTEXAI", "").lower() in ("1", "true")
    settings = {
        "security": {"auth": {"selectedType": "vertex-ai" if vertex else "gemini-api-key"}},
        "general": {"maxAttempts": GEMINI_MAX_ATTEMPTS, "enableAutoUpdate": False},
        "privacy": {"usageStatisticsEnabled": False},
    }
    (gemini_home / ".gemini").mkdir(parents=True, exist_ok=True)
    (gemini_home / ".gemini" / "settings.json").write_text(
        json.dumps(settings, indent=2) + "\n", encoding="utf-8"
    )
    env["GEMINI_CLI_HOME"] = str(gemini_home)
    return ["GEMINI_CLI_HOME"]


def _opencode_model(model: str | None) -> str | None:
    """opencode wants `provider/model`; a bare name exits 1 without sending a request."""
    return f"anthropic/{model}" if model and "/" not in model else model


# opencode's start-up fetches (model list, default plugins, language servers) need a network.
_OPENCODE_OFFLINE = (
    "OPENCODE_DISABLE_AUTOUPDATE",
    "OPENCODE_DISABLE_MODELS_FETCH",
    "OPENCODE_DISABLE_DEFAULT_PLUGINS",
    "OPENCODE_DISABLE_LSP_DOWNLOAD",
)


def _opencode_config(env: dict[str, str]) -> list[str]:
    """opencode's config through OPENCODE_CONFIG_CONTENT: no auto-update or sharing, and the
    Anthropic endpoint when one is set, ending in /v1 as its SDK wants (it appends only
    `/messages`, where Claude Code's ANTHROPIC_BASE_URL must not end in /v1)."""
    config: dict[str, object] = {"autoupdate": False, "share": "disabled"}
    base = env.get("ANTHROPIC_BASE_URL", "").rstrip("/")
    if base:
        url = base if base.endswith("/v1") else f"{base}/v1"
        config["provider"] = {"anthropic": {"options": {"baseURL": url}}}
    env["OPENCODE_CONFIG_CONTENT"] = json.dumps(config)
    for name in _OPENCODE_OFFLINE:
        env[name] = "1"
    return ["OPENCODE_CONFIG_CONTENT", *_OPENCODE_OFFLINE]


def _opencode_no_install(config_dir: Path) -> None:
    """Mark opencode's config directory as already installed. At every start opencode runs an
    npm install of its plugin package into each config directory whose `node_modules` is
    missing or whose lock file lacks a dependency: in a fresh home that is about 95 MB from the
    registry and seconds of CPU per run, or a failure on a machine without the network. The run
    loads no plugin, so nothing needs the package."""
    (config_dir / "node_modules").mkdir(parents=True, exist_ok=True)
    if (config_dir / "package-lock.json").exists():
        return  # an earlier run's, which opencode wrote or this did
    (config_dir / "package.json").write_text("{}\n", encoding="utf-8")
    lock = {"packages": {"": {"dependencies": {"@opencode-ai/plugin": "*"}}}}
    (config_dir / "package-lock.json").write_text(json.dumps(lock) + "\n", encoding="utf-8")


def _aider_model(env: dict[str, str], model: str | None) -> str | None:
    """aider reaches a custom OpenAI-compatible endpoint only through litellm's `openai/`
    prefix, and reads the endpoint from OPENAI_API_BASE."""
    base = env.get("OPENAI_API_BASE") or env.get("OPENAI_BASE_URL")
    if base:
        env["OPENAI_API_BASE"] = base
        if model and "/" not in model:
            return f"openai/{model}"
    return model


def _aider_files(env: dict[str, str], run_dir: Path) -> list[str]:
    """aider's chat and input histories in the run's own directory, not the worktree (its tags
    cache stays there and is excluded by `exclude_scratch`); prices from litellm's own copy."""
    run_dir.mkdir(parents=True, exist_ok=True)
    # Without a git identity aider writes a placeholder one into the repository's config, which
    # every worktree of the clone shares: two aiders at once collide on its lock. The run's
    # own global git config gives it one (the harness commits under its own name anyway).
    gitconfig = run_dir / "gitconfig"
    gitconfig.write_text(
        "[user]\n\tname = agent-harness aider\n\temail = aider@agent-harness.invalid\n",
        encoding="utf-8",
    )
    env["GIT_CONFIG_GLOBAL"] = str(gitconfig)
    env["AIDER_CHAT_HISTORY_FILE"] = str(run_dir / "chat.history.md")
    env["AIDER_INPUT_HISTORY_FILE"] = str(run_dir / "input.history")
    env["LITELLM_LOCAL_MODEL_COST_MAP"] = "True"
    return [
        "GIT_CONFIG_GLOBAL",
        "AIDER_CHAT_HISTORY_FILE",
        "AIDER_INPUT_HISTORY_FILE",
        "LITELLM_LOCAL_MODEL_COST_MAP",
    ]


# Files agents leave in the worktree that are theirs, not the project's.
SCRATCH_PATTERNS: dict[str, tuple[str, ...]] = {"aider": (".aider*",)}


def own_tmp(state_dir: Path, session: str, machine_tmp: str | None = None) -> Path:
    """A temporary folder for one agent session: `<machine's TMPDIR>/agent-harness-<uid>/
    <digest>`, made private (mode 700).

    Agent CLIs leave files in TMPDIR each time they start (Claude Code unpacks a native library
    of several MB; others keep sockets and probes): left in the machine's shared folder, a
    fleet that runs for days fills the disk. The run removes the folder with its session.

    It lies outside every repository (under the state folder, often inside the user's clone,
    git run in a test's temporary folder would find that clone and act on it), and its path
    is short: agents make Unix sockets in it, whose paths may hold only 107 bytes. Where the
    shared folder cannot be made ours alone (another user's, a link), it falls back to the
    state folder.
    """
    path = own_tmp_path(state_dir, session, machine_tmp)
    root = path.parent
    try:
        root.mkdir(mode=0o700, exist_ok=True)
        found = os.lstat(root)
        ours = stat.S_ISDIR(found.st_mode) and found.st_uid == os.getuid()
        if not ours or found.st_mode & 0o077:
            raise PermissionError(f"{root} is not this user's alone")
        path.mkdir(exist_ok=True, mode=0o700)
    except OSError:
        path = own_tmp_fallback(state_dir, session)
        path.mkdir(parents=True, exist_ok=True, mode=0o700)
    return path


def own_tmp_path(state_dir: Path, session: str, machine_tmp: str | None = None) -> Path:
    """Where `own_tmp` puts the session's temporary folder (made or not)."""
    root = Path(machine_tmp or tempfile.gettempdir()) / f"agent-harness-{os.getuid()}"
    return root / _tmp_digest(state_dir, session)


def own_tmp_fallback(state_dir: Path, session: str) -> Path:
    """Where it goes when the machine's temporary folder cannot be made private."""
    return Path(state_dir) / "tmp" / _tmp_digest(state_dir, session)


def _tmp_digest(state_dir: Path, session: str) -> str:
    where = f"{Path(state_dir).resolve()}\0{session}"
    return hashlib.sha256(where.encode("utf-8", "surrogateescape")).hexdigest()[:12]


# Pauses between tries at removing a session's temporary folder that is still written to.
_REMOVE_PAUSES_S = (0.0, 0.05, 0.1, 0.2, 0.4)


def remove_own_tmp(path: Path) -> None:
    """Remove a session's temporary folder once its programs have ended. A program of the
    agent's may still be stopping (tmux's Python wrapper stops its agent after the session is
    killed): a file it makes once the folder was listed keeps the folder, so the removal is
    tried again, for under a second in all. Only then: what cannot be removed for good (a
    read-only folder a tool left) is not waited for. Best effort: what is left stays until the
    session's next end removes it.

    First, any program still running with this folder as its TMPDIR is ended: the session's
    programs are over, so such a one slipped out of its process group (`setsid` and a double
    fork make a daemon that outlives the run, and goes on writing where it was started)."""
    end_strays(path)
    for pause in _REMOVE_PAUSES_S:
        time.sleep(pause)
        if _removed_or_lasting(path):
            return


def end_strays(tmp: Path) -> list[int]:
    """Kill this user's processes whose environment names `tmp` as their TMPDIR (read from
    /proc, where there is one); the pids killed."""
    marker = b"\0TMPDIR=" + os.fsencode(str(tmp)) + b"\0"
    killed: list[int] = []
    try:
        names = os.listdir("/proc")
    except OSError:
        return killed  # no /proc here (macOS): the process groups are all there is
    for name in names:
        if not name.isdigit() or int(name) == os.getpid():
            continue
        try:
            with open(f"/proc/{name}/environ", "rb") as environ:
                found = marker in b"\0" + environ.read()
            if found:
                os.kill(int(name), signal.SIGKILL)
                killed.append(int(name))
        except OSError:
            continue  # another user's, or gone meanwhile
    return killed


def _removed_or_lasting(path: Path) -> bool:
    """One try at removing `path`: True when it is gone, or something keeps it for good (any
    error but a folder found not empty, or an entry already gone)."""
    lasting: list[BaseException] = []

    def note(error: BaseException) -> None:
        if getattr(error, "errno", None) not in (errno.ENOTEMPTY, errno.ENOENT):
            lasting.append(error)

    if sys.version_info >= (3, 12):
        shutil.rmtree(path, onexc=lambda _f, _p, error: note(error))
    else:
        shutil.rmtree(path, onerror=lambda _f, _p, info: note(info[1]))
    return bool(lasting) or not os.path.lexists(path)


def exclude_scratch(preset: AgentPreset, worktree: Path) -> None:
    """Keep the agent's scratch files out of the item's commit through the repository's
    `info/exclude` (never the project's .gitignore, which would end up in the commit)."""
    patterns = SCRATCH_PATTERNS.get(preset.name, ())
    if not patterns:
        return
    from agent_harness.git.runner import git

    exclude = Path(git(worktree, "rev-parse", "--git-path", "info/exclude").strip())
    exclude = exclude if exclude.is_absolute() else Path(worktree) / exclude
    have = exclude.read_text(encoding="utf-8").splitlines() if exclude.exists() else []
    missing = [p for p in patterns if p not in have]
    if missing:
        exclude.parent.mkdir(parents=True, exist_ok=True)
        with exclude.open("a", encoding="utf-8") as out:
            out.write("".join(f"{p}\n" for p in missing))


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
