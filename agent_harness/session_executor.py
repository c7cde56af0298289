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
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path

from agent_harness import providers
from agent_harness.errors import UsageError
from agent_harness.session_host import (
    SessionExists,
    SessionHost,
    SessionNotFound,
    SessionSpec,
    safe_session_name,
)


class AgentState(StrEnum):
    DONE = "done"
    WAITING_FOR_INPUT = "waiting_for_input"
    TIMEOUT = "timeout"
    CRASHED = "crashed"
    RATE_LIMITED = "rate_limited"
    MISSING_BINARY = "missing_binary"


# Variables every agent gets: enough to find programs, a home, a locale and a terminal.
BASE_ENV_ALLOW = ("PATH", "HOME", "LANG", "LC_*", "TERM", "TMPDIR", "USER", "SHELL")
# Never passed to an agent, whatever a preset or a caller allows: the tracker's and our own.
NEVER_PASS = ("GH_TOKEN", "GITHUB_TOKEN", "GH_ENTERPRISE_TOKEN", "AGENT_HARNESS_*")

PROMPT_PLACEHOLDERS = ("{prompt_file}", "{prompt}")
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
        base_url_env=("GOOGLE_GEMINI_BASE_URL",),
        install_hint="npm install -g @google/gemini-cli",
        template=(
            "gemini", MODEL_ARGS, "--yolo", "--output-format", "stream-json", "-p", "{prompt}",
        ),
    ),
    "aider": AgentPreset(
        name="aider",
        binary="aider",
        vendor="openai",
        api_key_env=("OPENAI_API_KEY",),
        base_url_env=("OPENAI_API_BASE", "OPENAI_BASE_URL"),
        install_hint="python -m pip install aider-install && aider-install",
        template=(
            "aider", MODEL_ARGS, "--yes-always", "--no-auto-commits", "--no-pretty",
            "--message-file", "{prompt_file}",
        ),
        stdin_devnull=True,
    ),
    "opencode": AgentPreset(
        name="opencode",
        binary="opencode",
        vendor="anthropic",
        api_key_env=("ANTHROPIC_API_KEY",),
        base_url_env=("ANTHROPIC_BASE_URL",),
        install_hint="npm install -g opencode-ai",
        template=("opencode", "run", MODEL_ARGS, "--format", "json", "{prompt}"),
        stdin_devnull=True,
    ),
}  # fmt: skip


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
        raise UsageError(f"unknown agent {spec!r}; presets: {', '.join(sorted(PRESETS))}")
    if not argv or not any(p in part for part in argv for p in PROMPT_PLACEHOLDERS):
        raise UsageError(
            f"the agent command {spec!r} must say where the prompt goes: "
            "add {prompt_file} (a path) or {prompt} (the text)"
        )
    return AgentPreset(
        name="custom",
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


@dataclass(frozen=True)
class AgentOutcome:
    state: AgentState
    exit_code: int | None
    duration_s: float
    output_tail: str  # the last ~4 KB of what the agent wrote
    failure: providers.Failure | None
    reason: str  # one line a person understands
    session: str = ""
    log_path: Path | None = None
    adopted: bool = False  # True when a live session from an earlier run was picked up


def _ignore_state(state: AgentState, reason: str) -> None:
    return None


# A question left on screen: "...?", "...>", "...:", "[y/N]", "(y/n)", "Continue? (yes/no)".
_PROMPT_END = re.compile(
    r"(\?|>|:|\[[yYnN]/[yYnN]\]|\([yYnN]/[yYnN]\)|\((?:yes|no)/(?:yes|no)\)|›|❯)\s*$",
    re.IGNORECASE,
)
_ANSI = re.compile(r"\x1b\[[0-?]*[ -/]*[@-~]|\x1b\][^\x07]*(?:\x07|\x1b\\)|\x1b[()][0-9A-Za-z]")
# Limits that park an agent for a long time (killed early when it sits waiting for a reset) ...
_LIMIT_KINDS = frozenset({providers.FailureKind.WINDOW, providers.FailureKind.CAP})
# ... and everything that makes an ended run RATE_LIMITED rather than CRASHED.
_RATE_KINDS = _LIMIT_KINDS | {providers.FailureKind.BURST}
TAIL_BYTES = 4096


def strip_terminal_codes(text: str) -> str:
    """Terminal colour and cursor codes removed, so output reads as plain lines."""
    return _ANSI.sub("", text).replace("\r\n", "\n").replace("\r", "\n")


def looks_like_prompt(screen: str) -> bool:
    """Whether the last non-blank line of a screen ends as a question to the user does."""
    lines = [line for line in strip_terminal_codes(screen).split("\n") if line.strip()]
    return bool(lines) and bool(_PROMPT_END.search(lines[-1].rstrip()))


def _tail(text: str) -> str:
    data = text.encode("utf-8")
    return data[-TAIL_BYTES:].decode("utf-8", errors="ignore")


@dataclass
class _Watch:
    """What the poll loop has seen so far."""

    started: float
    last_change: float
    last_size: int = -1
    idle_examined: bool = False  # the current quiet spell has been looked at already
    failure: providers.Failure | None = field(default=None)


def run_agent(
    host: SessionHost,
    preset: AgentPreset,
    *,
    session: str,
    worktree: Path,
    prompt: str,
    state_dir: Path,
    env_source: Mapping[str, str],
    timeout_s: float,
    idle_s: float = 120.0,
    poll_s: float = 0.5,
    model: str | None = None,
    extra_env_allow: Iterable[str] = (),
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], None] = time.sleep,
    wall_clock: Callable[[], float] = time.time,
    on_state: Callable[[AgentState, str], None] = _ignore_state,
) -> AgentOutcome:
    """Run `preset` on `prompt` in `worktree` inside session `session`, and watch it end.

    If a live session of that name already exists (a restarted harness), it is adopted: no
    second agent is started, and the existing one is watched to its end. The prompt is written
    to `<state_dir>/prompts/<session>.md`; the agent's output goes to
    `<state_dir>/logs/<session>.log`. `on_state` hears WAITING_FOR_INPUT each time the agent
    settles at a question (it keeps running until `timeout_s`, so a person can attach and
    answer), and then the final state. A rate limit reported in the output wins over the exit
    code; a failure the agent reported but exited 0 after stays DONE (with `failure` set).
    """
    name = safe_session_name(session)
    state_dir = Path(state_dir)
    log_path = state_dir / "logs" / f"{name}.log"
    adopted = host.exists(name) and host.status(name).alive
    if not adopted:
        env = scrub_env(env_source, preset, extra_env_allow)
        if host.kind != "remote" and not _binary_found(preset.binary, env):
            reason = f"{preset.binary} not found on PATH; install it with: {preset.install_hint}"
            on_state(AgentState.MISSING_BINARY, reason)
            return AgentOutcome(
                AgentState.MISSING_BINARY, None, 0.0, "", None, reason, name, None, False
            )
        prompt_file = state_dir / "prompts" / f"{name}.md"
        prompt_file.parent.mkdir(parents=True, exist_ok=True)
        prompt_file.write_text(prompt, encoding="utf-8")
        command = preset.command(prompt_file, Path(worktree), model)
        spec = SessionSpec(
            name=name,
            command=command,
            cwd=Path(worktree),
            env=env,
            log_path=log_path,
            stdin_devnull=preset.stdin_devnull,
        )
        try:
            host.start(spec)
        except SessionExists:
            adopted = True  # another process started it between our look and our start
    now = clock()
    watch = _Watch(started=now, last_change=now)

    def outcome(state: AgentState, code: int | None, output: str, reason: str) -> AgentOutcome:
        return AgentOutcome(
            state,
            code,
            clock() - watch.started,
            _tail(output),
            watch.failure,
            reason,
            name,
            log_path if not adopted or log_path.exists() else None,
            adopted,
        )

    while True:
        status = host.status(name)
        if not status.alive:
            output = strip_terminal_codes(_output_or_empty(host, name))
            watch.failure = providers.classify_agent_output(preset.name, output, now=wall_clock())
            state, reason = _ended(preset.name, status.exit_code, watch.failure)
            on_state(state, reason)
            return outcome(state, status.exit_code, output, reason)
        now = clock()
        output = _output_or_empty(host, name)
        if len(output) != watch.last_size:
            watch.last_size = len(output)
            watch.last_change = now
            watch.idle_examined = False
        if now - watch.started >= timeout_s:
            host.kill(name)
            plain = strip_terminal_codes(output)
            # Only what it said last: a limit it hit and got past earlier is not why it hangs.
            watch.failure = providers.classify_agent_output(
                preset.name, _tail(plain), now=wall_clock()
            )
            if watch.failure is not None and watch.failure.kind in _LIMIT_KINDS:
                reason = f"{preset.name} stopped at a usage limit: {watch.failure.describe()}"
                state = AgentState.RATE_LIMITED
            else:
                reason = f"{preset.name} still running after {timeout_s:g}s; session killed"
                state = AgentState.TIMEOUT
            on_state(state, reason)
            return outcome(state, None, plain, reason)
        if now - watch.last_change >= idle_s and not watch.idle_examined:
            # Once per quiet spell: the screen is made from the same output, so looking again
            # before the agent writes something new would find the same thing.
            watch.idle_examined = True
            plain = strip_terminal_codes(output)
            limit = providers.classify_agent_output(preset.name, _tail(plain), now=wall_clock())
            if limit is not None and limit.kind in _LIMIT_KINDS:
                # An interactive agent that hit its window waits for the reset by itself;
                # the item is better parked than left holding a worker for hours.
                host.kill(name)
                watch.failure = limit
                reason = f"{preset.name} stopped at a usage limit: {limit.describe()}"
                on_state(AgentState.RATE_LIMITED, reason)
                return outcome(AgentState.RATE_LIMITED, None, plain, reason)
            screen = host.screen(name, 50)
            if looks_like_prompt(screen):
                question = _last_line(screen)
                on_state(
                    AgentState.WAITING_FOR_INPUT,
                    f"{preset.name} is waiting for input: {question!r} "
                    f"(attach: {shlex.join(host.attach_command(name))})",
                )
        # Look often at first (quick agents are done in tens of milliseconds), then settle
        # at poll_s: the first second costs a few extra looks, a long run costs nothing more.
        elapsed = now - watch.started
        sleep(min(poll_s, max(0.005, elapsed / 4)))


def _output_or_empty(host: SessionHost, name: str) -> str:
    try:
        return host.output(name)
    except SessionNotFound:
        return ""


def _last_line(screen: str) -> str:
    lines = [line.strip() for line in strip_terminal_codes(screen).split("\n") if line.strip()]
    return lines[-1][:200] if lines else ""


def _binary_found(binary: str, env: Mapping[str, str]) -> bool:
    return shutil.which(binary, path=env.get("PATH")) is not None


def _ended(
    agent: str, code: int | None, failure: providers.Failure | None
) -> tuple[AgentState, str]:
    if failure is not None and failure.kind in _RATE_KINDS:
        return AgentState.RATE_LIMITED, f"{agent} hit a rate limit: {failure.describe()}"
    if code is None:
        return AgentState.CRASHED, f"{agent}'s session ended without an exit status (killed?)"
    if code == 0:
        # A failure the agent recovered from (an overload it retried) does not undo a clean
        # exit; it is still returned in the outcome for the record.
        return AgentState.DONE, f"{agent} finished (exit 0)"
    if failure is not None:
        return AgentState.CRASHED, f"{agent} exited with status {code}: {failure.describe()}"
    return AgentState.CRASHED, f"{agent} exited with status {code}"


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
