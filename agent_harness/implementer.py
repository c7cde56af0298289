"""Who writes the code for an item: a CLI agent in a terminal session, or the direct-API executor.

Both sit behind one small Protocol, so the run pipeline treats them alike: it hands over the
worktree and the prompt and gets back an `ImplementResult` that says, in classified terms, how
the attempt ended (done, crashed, timed out, waiting on a rate-limit reset, refused, ...).
"""

from __future__ import annotations

import dataclasses
import json
import subprocess
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from agent_harness.plan import WorkItem
    from agent_harness.providers import Failure
    from agent_harness.session_executor import AgentOutcome, AgentPreset
    from agent_harness.session_host import SessionHost
    from agent_harness.worktrees import Worktree

StateCallback = Callable[[str, str], None]


@dataclass(frozen=True)
class ImplementResult:
    """How one implementation attempt ended."""

    ok: bool  # the implementer finished normally; whether it changed anything is checked later
    state: str  # done | crashed | timeout | rate_limited | missing_binary | refused | blocked
    reason: str
    failure: Failure | None = None
    wait_until: float | None = None  # epoch seconds; set when a spent window should be waited out
    permanent: bool = False  # retrying will not help (a spent cap, a missing binary, ...)
    tokens_in: int | None = None
    tokens_out: int | None = None
    cost_usd: float | None = None
    output_tail: str = ""


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


@dataclass(frozen=True)
class CliReport:
    """What an agent CLI said about its own run in its structured output."""

    tokens_in: int | None = None
    tokens_out: int | None = None
    cost_usd: float | None = None
    error: str | None = None  # the CLI's own error text, when it reported one
    error_status: int | None = None  # the HTTP status behind that error, when given
    denials: tuple[str, ...] = field(default=())  # tool calls it was not allowed to make


def read_cli_report(output: str) -> CliReport:
    """Read Claude Code's `result` event and Codex's JSONL (`turn.*`, `error`, rejections)."""
    from agent_harness.agent_review import usage_of

    tokens_in, tokens_out, cost = usage_of(output)
    error: str | None = None
    status: int | None = None
    denials: list[str] = []
    for line in output.splitlines():
        line = line.strip()
        if "patch rejected" in line or "blocked by read-only sandbox" in line:
            # Codex logs a refused patch on stderr only, and still exits 0.
            denials.append(line.split("error=", 1)[-1])
            continue
        if not line.startswith("{"):
            continue
        try:
            event = json.loads(line)
        except json.JSONDecodeError:
            continue
        if not isinstance(event, dict):
            continue
        kind = event.get("type")
        if kind == "result":
            if event.get("is_error"):
                error = str(event.get("result") or event.get("subtype") or "error")
                got = event.get("api_error_status")
                status = got if isinstance(got, int) else status
            for denial in event.get("permission_denials") or []:
                if isinstance(denial, dict):
                    denials.append(_describe_denial(denial))
        elif kind == "turn.failed":
            failed = event.get("error")
            message = failed.get("message") if isinstance(failed, dict) else None
            error = str(message or "turn failed")
        elif kind == "error" and isinstance(event.get("message"), str):
            error = error or event["message"]
    return CliReport(tokens_in, tokens_out, cost, error, status, tuple(denials))


def _describe_denial(denial: Mapping[str, object]) -> str:
    tool = str(denial.get("tool_name") or "a tool")
    args = denial.get("tool_input")
    target = ""
    if isinstance(args, dict):
        target = str(args.get("file_path") or args.get("command") or "")
    return f"{tool} {target}".strip()


def _tree_changed(tree: Worktree) -> bool:
    """Whether the agent left any change in its worktree (files or commits)."""
    status = subprocess.run(
        ["git", "status", "--porcelain"], cwd=tree.path, capture_output=True, text=True
    )
    head = subprocess.run(
        ["git", "rev-parse", "HEAD"], cwd=tree.path, capture_output=True, text=True
    )
    return bool(status.stdout.strip()) or head.stdout.strip() != tree.base_sha


class Implementer(Protocol):
    """Anything that can try to do a work item in a worktree."""

    name: str
    vendor: str

    def implement(
        self,
        item: WorkItem,
        tree: Worktree,
        prompt: str,
        *,
        session: str,
        state_dir: Path,
        on_state: StateCallback,
    ) -> ImplementResult: ...


@dataclass(frozen=True)
class SessionRun:
    """One CLI agent run in a session: how it ended, and everything it printed."""

    outcome: AgentOutcome
    output: str


def run_cli_agent(
    host: SessionHost,
    preset: AgentPreset,
    *,
    session: str,
    workdir: Path,
    prompt: str,
    state_dir: Path,
    home: Path,
    env_source: Mapping[str, str],
    timeout_s: float,
    idle_s: float,
    poll_s: float,
    model: str | None = None,
    own_login: bool = False,
    on_state: Callable[[Any, str], None] | None = None,
) -> SessionRun:
    """Run a CLI agent (as implementer or reviewer) in its own home, then close the session
    once the program has ended: its screen lives on in the log, which is read back whole."""
    from agent_harness.session_executor import AgentState, run_agent

    setup = agent_setup(preset, home, env_source, model=model, own_login=own_login)
    outcome = run_agent(
        host,
        setup.preset or preset,
        session=session,
        worktree=workdir,
        prompt=prompt,
        state_dir=state_dir,
        env_source=setup.env,
        timeout_s=timeout_s,
        idle_s=idle_s,
        poll_s=poll_s,
        model=model,
        extra_env_allow=setup.allow,
        on_state=on_state or (lambda _state, _detail: None),
    )
    if AgentState(outcome.state) is not AgentState.WAITING_FOR_INPUT:
        host.kill(outcome.session or session)
    output = outcome.output_tail
    if outcome.log_path is not None and outcome.log_path.is_file():
        output = outcome.log_path.read_text(encoding="utf-8", errors="replace")
    return SessionRun(outcome, output)


class CliImplementer:
    """A CLI agent (Claude Code, Codex, ... or any command template) in a terminal session."""

    def __init__(
        self,
        host: SessionHost,
        preset: AgentPreset,
        env_source: Mapping[str, str],
        *,
        timeout_s: float,
        idle_s: float = 120.0,
        poll_s: float = 0.2,
        model: str | None = None,
        own_login: bool = False,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.model = model
        self.own_login = own_login
        self.host = host
        self.preset = preset
        self.name = preset.name
        self.vendor = preset.vendor
        self.env_source = env_source
        self.timeout_s = timeout_s
        self.idle_s = idle_s
        self.poll_s = poll_s
        self.clock = clock

    def implement(
        self,
        item: WorkItem,
        tree: Worktree,
        prompt: str,
        *,
        session: str,
        state_dir: Path,
        on_state: StateCallback,
    ) -> ImplementResult:
        from agent_harness.providers import FailureKind
        from agent_harness.session_executor import AgentState

        ran = run_cli_agent(
            self.host,
            self.preset,
            session=session,
            workdir=tree.path,
            prompt=prompt,
            state_dir=state_dir,
            home=Path(state_dir) / "agent-home" / self.preset.name,
            env_source=self.env_source,
            timeout_s=self.timeout_s,
            idle_s=self.idle_s,
            poll_s=self.poll_s,
            model=self.model,
            own_login=self.own_login,
            on_state=lambda state, detail: on_state(str(state), detail),
        )
        outcome, output = ran.outcome, ran.output
        state = AgentState(outcome.state)
        failure = outcome.failure
        report = read_cli_report(output)
        reason = outcome.reason
        if state is not AgentState.DONE:
            # A failure's reason carries the agent's last words: usually they say why.
            last = next(
                (
                    line.strip()
                    for line in reversed(outcome.output_tail.splitlines())
                    if line.strip()
                ),
                "",
            )
            if last and not last.startswith("{") and last not in reason:
                reason = f"{reason}: {last[:200]}"

        def result(ok: bool, name: str, **extra: object) -> ImplementResult:
            return ImplementResult(
                ok=ok,
                state=name,
                reason=reason,
                failure=failure,
                output_tail=outcome.output_tail,
                wait_until=extra.get("wait_until"),  # type: ignore[arg-type]
                permanent=bool(extra.get("permanent", False)),
                tokens_in=report.tokens_in,
                tokens_out=report.tokens_out,
                cost_usd=report.cost_usd,
            )

        if state is AgentState.DONE and report.denials and not _tree_changed(tree):
            # Exit 0 with nothing done: the CLI's permissions or sandbox stopped every edit,
            # and running it again as configured would stop them again.
            reason = f"{self.name} was not allowed to work: {'; '.join(report.denials[:5])}"
            return result(False, "refused", permanent=True)
        if state is AgentState.DONE and report.error is not None and not _tree_changed(tree):
            reason = f"{self.name} exited 0 but reported: {report.error}"
            return result(False, "crashed")
        if state is AgentState.CRASHED and failure is None and report.error_status == 429:
            # An API-key login gets no reset time in the output, only the 429: wait a while.
            reason = f"{self.name} hit a rate limit: {report.error}"
            return result(False, "rate_limited", wait_until=self.clock() + 60.0)
        if state is AgentState.CRASHED and report.error is not None:
            reason = f"{outcome.reason}: {report.error}"
        if state is AgentState.DONE:
            return result(True, "done")
        if state is AgentState.MISSING_BINARY:
            return result(False, "missing_binary", permanent=True)
        if state is AgentState.RATE_LIMITED and failure is not None:
            if failure.kind is FailureKind.CAP:
                return result(False, "rate_limited", permanent=True)
            wait = failure.reset_at or (self.clock() + (failure.retry_after or 60.0))
            return result(False, "rate_limited", wait_until=wait)
        if state is AgentState.TIMEOUT:
            return result(False, "timeout")
        if failure is not None and failure.kind in (
            FailureKind.REFUSAL,
            FailureKind.AUTH,
            FailureKind.CONTEXT_TOO_LONG,
        ):
            return result(False, "refused", permanent=True)
        return result(False, "crashed")


class ApiImplementer:
    """The direct-API executor: a planner and an implementer model editing the worktree."""

    def __init__(
        self,
        client: Any,
        *,
        vendor: str,
        name: str = "executor",
        item_checks: Callable[[WorkItem], list[str]] = lambda _item: [],
        check_env: Mapping[str, str] | None = None,
        budgets: Any = None,
    ) -> None:
        self.client = client
        self.vendor = vendor
        self.name = name
        self.item_checks = item_checks
        self.check_env = check_env
        self.budgets = budgets

    def secret_values(self) -> tuple[str, ...]:
        """The keys the planner and implementer calls carry; see `ModelClient.secret_values`."""
        held = getattr(self.client, "secret_values", None)
        return tuple(held()) if callable(held) else ()

    def implement(
        self,
        item: WorkItem,
        tree: Worktree,
        prompt: str,
        *,
        session: str,
        state_dir: Path,
        on_state: StateCallback,
    ) -> ImplementResult:
        from agent_harness.executor import Executor
        from agent_harness.model_client import EndpointParked, ModelCallFailed
        from agent_harness.providers import FailureKind

        state_dir.mkdir(parents=True, exist_ok=True)
        executor = Executor(
            self.client,
            budgets=self.budgets,
            events=lambda kind, payload: on_state(kind, str(payload.get("step", ""))),
            worker=session,
            item_checks=self.item_checks(item),
            check_env=self.check_env,
        )
        try:
            result = executor.execute(item, tree.path, state_dir / "plan.json", resume=True)
        except EndpointParked as exc:
            return ImplementResult(False, "rate_limited", str(exc), wait_until=exc.until)
        except ModelCallFailed as exc:
            kind = exc.failure.kind
            if kind is FailureKind.WINDOW:
                return ImplementResult(
                    False,
                    "rate_limited",
                    exc.message,
                    failure=exc.failure,
                    wait_until=exc.failure.reset_at,
                )
            never_retry = kind in (
                FailureKind.CAP,
                FailureKind.REFUSAL,
                FailureKind.AUTH,
                FailureKind.CONTEXT_TOO_LONG,
                FailureKind.BAD_REQUEST,
            )
            return ImplementResult(
                False,
                "refused" if never_retry else "crashed",
                exc.message,
                failure=exc.failure,
                permanent=never_retry,
            )
        if result.status == "done":
            return ImplementResult(
                True,
                "done",
                f"plan done in {result.calls} model calls",
                tokens_in=result.tokens_in,
                tokens_out=result.tokens_out,
            )
        return ImplementResult(
            False,
            "blocked",
            f"executor blocked at step {result.blocking_step}: {result.blocker}",
            tokens_in=result.tokens_in,
            tokens_out=result.tokens_out,
        )
