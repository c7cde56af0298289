"""Run one CLI coding agent for one item in a session, and say truthfully how it ended.

The agent is started from a preset (its documented non-interactive command line and the only
environment variables it may see), then watched by polling the session host: it ended (done or
crashed, unless its output reports a rate limit), it sits idle at a question (waiting for
input, which a person may answer by attaching), or it ran out of time. Clock and sleep are
passed in, so every one of those paths is testable without waiting.
"""

from __future__ import annotations

import fnmatch
import re
import shlex
import shutil
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

from agent_harness.errors import UsageError

# Variables every agent gets: enough to find programs, a home, a locale and a terminal.
BASE_ENV_ALLOW = ("PATH", "HOME", "LANG", "LC_*", "TERM", "TMPDIR", "USER", "SHELL")


# Never passed to an agent, whatever a preset or a caller allows: the tracker's and our own.
NEVER_PASS = ("GH_TOKEN", "GITHUB_TOKEN", "GH_ENTERPRISE_TOKEN", "AGENT_HARNESS_*")


PROMPT_PLACEHOLDERS = ("{prompt_file}", "{prompt}")
KNOWN_PLACEHOLDERS = (*PROMPT_PLACEHOLDERS, "{worktree}", "{model}", "{model_args}")
# `{name}`, but not a shell's `${NAME}` (in a template that runs `sh -c "…"` itself).
_PLACEHOLDER = re.compile(r"(?<!\$)\{([A-Za-z_][A-Za-z0-9_]*)\}")


MODEL_ARGS = "{model_args}"


# Linux refuses a single argv string over 128 KiB; stay clear of it.
MAX_PROMPT_ARG_BYTES = 120_000


@dataclass(frozen=True)
class AgentPreset:
    """How to run one CLI agent non-interactively, and which secrets it may see.

    `template` is the argv with placeholders: `{prompt}` (the prompt text as one argument; no
    shell is involved, so no quoting), `{prompt_file}`, `{worktree}`, `{model}`, and the whole
    element `{model_args}`, which becomes `model_args` when a model is given and nothing when not.
    """

    name: str
    binary: str
    vendor: str
    api_key_env: tuple[str, ...]
    install_hint: str
    template: tuple[str, ...] = ()
    model_args: tuple[str, ...] = ("--model", "{model}")
    base_url_env: tuple[str, ...] = ()
    stdin_devnull: bool = False

    def command(self, prompt_file: Path, worktree: Path, model: str | None) -> list[str]:
        """The argv for one run; reads the prompt file when the template wants its text."""
        values = {"{prompt_file}": str(prompt_file), "{worktree}": str(worktree)}
        if any("{prompt}" in part for part in self.template):
            text = Path(prompt_file).read_text(encoding="utf-8")
            if len(text.encode("utf-8")) > MAX_PROMPT_ARG_BYTES:
                raise UsageError(
                    f"the prompt is too long to pass to {self.name} as an argument "
                    f"({len(text.encode('utf-8'))} bytes; limit {MAX_PROMPT_ARG_BYTES})"
                )
            values["{prompt}"] = text
        argv: list[str] = []
        for part in self.template:
            if part == MODEL_ARGS:
                if model:
                    argv += [arg.replace("{model}", model) for arg in self.model_args]
                continue
            if "{model}" in part:
                if not model:
                    raise UsageError(f"the {self.name} command needs a model ({part!r})")
                part = part.replace("{model}", model)
            for key, value in values.items():
                part = part.replace(key, value)
            argv.append(part)
        return argv


PRESETS: dict[str, AgentPreset] = {
    "claude": AgentPreset(
        name="claude",
        binary="claude",
        vendor="anthropic",
        api_key_env=("ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN", "CLAUDE_CODE_OAUTH_TOKEN"),
        base_url_env=("ANTHROPIC_BASE_URL",),
        install_hint="npm install -g @anthropic-ai/claude-code",
        template=(
            "claude", "-p", "{prompt}", "--output-format", "stream-json", "--verbose",
            "--permission-mode", "acceptEdits", MODEL_ARGS,
        ),
    ),
    "codex": AgentPreset(
        name="codex",
        binary="codex",
        vendor="openai",
        api_key_env=("OPENAI_API_KEY",),
        base_url_env=("OPENAI_BASE_URL",),
        install_hint="npm install -g @openai/codex",
        template=(
            "codex", "exec", "--json", "--sandbox", "workspace-write", MODEL_ARGS, "{prompt}",
        ),
        stdin_devnull=True,  # codex exec reads stdin as extra context when it is not a tty
    ),
    "gemini": AgentPreset(
        name="gemini",
        binary="gemini",
        vendor="google",
        api_key_env=(
            "GEMINI_API_KEY", "GOOGLE_API_KEY", "GOOGLE_APPLICATION_CREDENTIALS",
            "GOOGLE_CLOUD_PROJECT", "GOOGLE_CLOUD_LOCATION", "GOOGLE_GENAI_USE_VERTEXAI",
        ),
        base_url_env=(
            "GOOGLE_GEMINI_BASE_URL", "GOOGLE_VERTEX_BASE_URL", "GEMINI_CLI_SYSTEM_SETTINGS_PATH",
        ),
        install_hint="npm install -g @google/gemini-cli",
        # A harness worktree is never a folder the user trusted: without --skip-trust every
        # headless run stops at once (exit 55).
        template=(
            "gemini", MODEL_ARGS, "--yolo", "--skip-trust", "--output-format", "stream-json",
            "-p", "{prompt}",
        ),
    ),
    "aider": AgentPreset(
        name="aider",
        binary="aider",
        vendor="openai",
        api_key_env=("OPENAI_API_KEY",),
        base_url_env=("OPENAI_API_BASE", "OPENAI_BASE_URL"),
        install_hint="python -m pip install aider-install && aider-install",
        # --yes-always would otherwise accept the analytics opt-in; --no-gitignore keeps it
        # from adding `.aider*` to the project's .gitignore (the run excludes them instead).
        template=(
            "aider", MODEL_ARGS, "--yes-always", "--no-auto-commits", "--no-pretty",
            "--no-check-update", "--no-show-release-notes", "--analytics-disable",
            "--no-gitignore", "--message-file", "{prompt_file}",
        ),
        stdin_devnull=True,
    ),
    "opencode": AgentPreset(
        name="opencode",
        binary="opencode",
        vendor="anthropic",
        api_key_env=("ANTHROPIC_API_KEY",),
        # Not ANTHROPIC_BASE_URL: opencode wants it ending in /v1, Claude Code without. The run
        # reads that one and hands opencode its own provider config (agents/setup.py).
        base_url_env=("OPENCODE_CONFIG_CONTENT",),
        install_hint="npm install -g opencode-ai",
        # Its error log is the only word of a rate limit it is waiting out (see retrying_limit).
        template=(
            "opencode", "run", MODEL_ARGS, "--format", "json", "--print-logs", "--log-level",
            "ERROR", "{prompt}",
        ),
        stdin_devnull=True,
    ),
}  # fmt: skip


# The preset an agent command of the person's own is run as (`--agent 'tool {prompt_file}'`).
CUSTOM = "custom"


def preset_for(spec: str) -> AgentPreset:
    """A preset by name, or a custom agent from a command template.

    A template is split like a shell would (shlex) but never run through one. It must say where
    the prompt goes with `{prompt_file}` or `{prompt}`: appending the prompt silently would be
    a guess about a tool we know nothing of, so a template without either is refused.
    """
    spec = spec.strip()
    if spec in PRESETS:
        return PRESETS[spec]
    try:
        argv = shlex.split(spec)
    except ValueError as exc:
        raise UsageError(f"cannot read the agent command {spec!r}: {exc}") from exc
    if len(argv) == 1 and "{" not in spec:
        raise UsageError(
            f"unknown agent {spec!r}; presets: {', '.join(sorted(PRESETS))}; or a command "
            f"template saying where the prompt goes, e.g. "
            f"'{shlex.quote(argv[0])} --prompt-file {{prompt_file}}'"
        )
    if not argv or not any(p in part for part in argv for p in PROMPT_PLACEHOLDERS):
        raise UsageError(
            f"the agent command {spec!r} must say where the prompt goes: "
            "add {prompt_file} (a path) or {prompt} (the text)"
        )
    unknown = sorted({f"{{{name}}}" for part in argv for name in _PLACEHOLDER.findall(part)})
    unknown = [name for name in unknown if name not in KNOWN_PLACEHOLDERS]
    if unknown:  # passed as written, the agent got `{nosuch}` itself
        raise UsageError(
            f"the agent command {spec!r} names {', '.join(unknown)}, which is no placeholder; "
            f"known: {', '.join(KNOWN_PLACEHOLDERS)} (no shell runs the command)"
        )
    return AgentPreset(
        name=CUSTOM,
        binary=argv[0],
        vendor="custom",
        api_key_env=(),
        install_hint=f"make sure {argv[0]} is installed and on PATH",
        template=tuple(argv),
    )


def _matches(name: str, patterns: Iterable[str]) -> bool:
    return any(fnmatch.fnmatchcase(name, pattern) for pattern in patterns)


def scrub_env(
    source: Mapping[str, str], preset: AgentPreset, extra_allow: Iterable[str] = ()
) -> dict[str, str]:
    """The complete environment for the agent: only allow-listed names, never a tracker token.

    Allowed are the basics (`BASE_ENV_ALLOW`), the preset's own vendor key(s) and base-URL
    variables, and `extra_allow` (names or `PREFIX*` patterns). Asking to pass one of
    `NEVER_PASS` is refused rather than silently dropped.
    """
    extra = tuple(extra_allow)
    refused = [name for name in extra if _matches(name, NEVER_PASS) or name in ("*", "")]
    if refused:
        raise UsageError(f"refusing to pass {', '.join(refused)} to an agent")
    allow = (*BASE_ENV_ALLOW, *preset.api_key_env, *preset.base_url_env, *extra)
    return {
        key: value
        for key, value in source.items()
        if _matches(key, allow) and not _matches(key, NEVER_PASS)
    }


def describe_presets(path: str | None) -> list[dict[str, object]]:
    """Each preset as plain data: its command line, env allow-list, and whether it is installed."""
    rows: list[dict[str, object]] = []
    for preset in PRESETS.values():
        shown = [
            "[--model M]" if part == MODEL_ARGS else part.replace("{prompt}", "<prompt>")
            for part in preset.template
        ]
        rows.append(
            {
                "name": preset.name,
                "vendor": preset.vendor,
                "binary": preset.binary,
                "installed": shutil.which(preset.binary, path=path) is not None,
                "command": " ".join(shown).replace("{prompt_file}", "<prompt_file>"),
                "env": [*BASE_ENV_ALLOW, *preset.api_key_env, *preset.base_url_env],
                "stdin": "/dev/null" if preset.stdin_devnull else "terminal",
                "install": preset.install_hint,
            }
        )
    return rows
