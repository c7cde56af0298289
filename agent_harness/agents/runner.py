"""Running one CLI agent in one session and watching it to its end.

The runner reports how the agent ended (done, crashed, rate limited, timed out, waiting for
input) from its exit code, its screen and its output, never from the agent's own story.
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path
from typing import Any

from agent_harness.agents.presets import AgentPreset, scrub_env
from agent_harness.agents.setup import agent_setup, exclude_scratch, own_tmp, remove_own_tmp
from agent_harness.errors import UsageError
from agent_harness.models.agent_output import classify_agent_output, retrying_limit
from agent_harness.models.failures import Failure, FailureKind
from agent_harness.sessions.protocol import (
    SessionError,
    SessionExists,
    SessionHost,
    SessionNotFound,
    SessionSpec,
    safe_session_name,
)
from agent_harness.sessions.wrapper import read_log


class AgentState(StrEnum):
    DONE = "done"
    WAITING_FOR_INPUT = "waiting_for_input"
    TIMEOUT = "timeout"
    CRASHED = "crashed"
    RATE_LIMITED = "rate_limited"
    MISSING_BINARY = "missing_binary"


@dataclass(frozen=True)
class AgentOutcome:
    state: AgentState
    exit_code: int | None
    duration_s: float
    output_tail: str  # the last ~4 KB of what the agent wrote
    failure: Failure | None
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
_LIMIT_KINDS = frozenset({FailureKind.WINDOW, FailureKind.CAP})


# ... and everything that makes an ended run RATE_LIMITED rather than CRASHED.
_RATE_KINDS = _LIMIT_KINDS | {FailureKind.BURST}


TAIL_BYTES = 4096


# Agents whose exit status says nothing about a provider's failure: only their output does.
_SILENT_EXIT_AGENTS = frozenset({"aider"})


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
    sleep: Callable[[float], None] | None = None,
    wall_clock: Callable[[], float] = time.time,
    on_state: Callable[[AgentState, str], None] = _ignore_state,
    adopt_ended: bool = False,
) -> AgentOutcome:
    """Run `preset` on `prompt` in `worktree` inside session `session`, and watch it end.

    A live session of that name (a restarted harness's) is adopted, not started twice, and
    with `adopt_ended` one that ended while no harness watched: its end is read.
    The prompt is written to `<state_dir>/prompts/<session>.md`; the agent's output goes to
    `<state_dir>/logs/<session>.log`. `on_state` hears WAITING_FOR_INPUT each time the agent
    settles at a question (it keeps running until `timeout_s`, so a person can attach and
    answer), and then the final state. A spent window or cap reported in the output wins over
    the exit code; any other failure the agent reported but exited 0 after (a burst it waited
    out, say) stays DONE, with `failure` set. Between looks it waits with `sleep`; by default
    with the host's `wait_ended` where it has one (it returns the moment the session ends),
    else `time.sleep`.
    """
    name = safe_session_name(session)
    state_dir = Path(state_dir)
    log_path = state_dir / "logs" / f"{name}.log"
    # Only a session that ended unwatched needs a look first: a live one is refused by the
    # host's `start` (SessionExists) and adopted, so none costs nothing (on tmux, a call).
    adopted = adopt_ended and host.exists(name)
    if not adopted:
        env = scrub_env(env_source, preset, extra_env_allow)
        if host.kind != "remote" and not _binary_found(preset.binary, env):
            if not _live(host, name):  # a live agent is watched, whatever PATH says now
                return _missing(preset, name, on_state)
            adopted = True
        else:
            prompt_file = state_dir / "prompts" / f"{name}.md"
            adopted = not _started(
                host, preset, name, prompt, prompt_file, log_path, Path(worktree), model, env
            )
    watch = _Watch(host, preset.name, name, log_path, adopted, clock, wall_clock, on_state)
    if sleep is None:
        sleep = _pause_for(host, name)
    while True:
        ended = watch.look(timeout_s, idle_s)
        if ended is not None:
            return ended
        # Look often at first (quick agents are done in tens of milliseconds), then settle
        # at poll_s: the first second costs a few extra looks, a long run costs nothing more.
        sleep(min(poll_s, max(0.005, watch.elapsed / 4)))


def _started(
    host: SessionHost,
    preset: AgentPreset,
    name: str,
    prompt: str,
    prompt_file: Path,
    log_path: Path,
    worktree: Path,
    model: str | None,
    env: dict[str, str],
) -> bool:
    """Start the agent's session; False where a live session of the name is to be adopted."""
    command = _command(host, preset, name, prompt, prompt_file, worktree, model)
    return command is not None and _start_session(
        host, preset, name, command, worktree, env, log_path
    )


def _command(
    host: SessionHost,
    preset: AgentPreset,
    name: str,
    prompt: str,
    prompt_file: Path,
    worktree: Path,
    model: str | None,
) -> list[str] | None:
    """The agent's command line, its prompt written to `prompt_file` first; None where a
    live session of the name is there to adopt.

    An earlier attempt's prompt file may be what that live agent reads (aider's
    `--message-file`), so a different prompt replaces it only once no session of the name
    runs: an item's first attempt, which finds no file, pays no look. A command that cannot
    be made (a prompt too long for an argument) stops nothing that already runs either.
    """
    looked = False
    text = prompt.encode("utf-8")
    held = _held(prompt_file, text)
    if held != "same":
        if held == "another":
            if _live(host, name):
                return None
            looked = True
        prompt_file.parent.mkdir(parents=True, exist_ok=True)
        prompt_file.write_bytes(text)
    try:
        return preset.command(prompt_file, worktree, model)
    except UsageError:
        if not looked and _live(host, name):
            return None
        raise


def _held(prompt_file: Path, text: bytes) -> str:
    """Whether the prompt file holds `text` ("same"), is missing ("none"), or holds another
    prompt ("another"; so does a file that cannot be read)."""
    try:
        return "same" if prompt_file.read_bytes() == text else "another"
    except FileNotFoundError:
        return "none"
    except OSError:
        return "another"


def _live(host: SessionHost, name: str) -> bool:
    return host.exists(name) and host.status(name).alive


def _missing(
    preset: AgentPreset, name: str, on_state: Callable[[AgentState, str], None]
) -> AgentOutcome:
    """The outcome of an agent whose program is not on its PATH (said to `on_state` too)."""
    reason = missing_reason(preset)
    on_state(AgentState.MISSING_BINARY, reason)
    return AgentOutcome(AgentState.MISSING_BINARY, None, 0.0, "", None, reason, name, None, False)


def _pause_for(host: SessionHost, name: str) -> Callable[[float], None]:
    """How to wait between two looks at session `name`: until it ends, where the host can
    tell (at most the given seconds), else a plain sleep."""
    waiter = getattr(host, "wait_ended", None)
    if not callable(waiter):
        return time.sleep
    return lambda seconds: waiter(name, seconds)


def _start_session(
    host: SessionHost,
    preset: AgentPreset,
    name: str,
    command: list[str],
    worktree: Path,
    env: dict[str, str],
    log_path: Path,
) -> bool:
    """Start the agent's session; False when another process started it between our look
    and our start, so the caller adopts that one instead."""
    spec = SessionSpec(
        name=name,
        command=command,
        cwd=worktree,
        env=env,
        log_path=log_path,
        stdin_devnull=preset.stdin_devnull,
    )
    try:
        host.start(spec)
    except SessionExists:
        return False
    return True


class _Watch:
    """One session watched to its end, and what the poll loop has seen of it so far."""

    def __init__(
        self,
        host: SessionHost,
        agent: str,
        name: str,
        log_path: Path,
        adopted: bool,
        clock: Callable[[], float],
        wall_clock: Callable[[], float],
        on_state: Callable[[AgentState, str], None],
    ) -> None:
        self.host = host
        self.agent = agent
        self.name = name
        self.log_path = log_path
        self.adopted = adopted
        self.clock = clock
        self.wall_clock = wall_clock
        self.on_state = on_state
        self.started = self.now = clock()
        self.last_change = self.started
        self.last_size = -1
        self.idle_examined = False  # the current quiet spell has been looked at already
        self.failure: Failure | None = None

    @property
    def elapsed(self) -> float:
        """Seconds from the start of the watch to the last look."""
        return self.now - self.started

    def look(self, timeout_s: float, idle_s: float) -> AgentOutcome | None:
        """Look at the session once; how it ended, or None while it is still working."""
        status = self.host.status(self.name)
        if not status.alive:
            return self._exited(status.exit_code)
        self.now = self.clock()
        output = _output_or_empty(self.host, self.name)
        if len(output) != self.last_size:
            self.last_size = len(output)
            self.last_change = self.now
            self.idle_examined = False
            retrying = retrying_limit(
                self.agent, _tail(strip_terminal_codes(output)), now=self.wall_clock()
            )
            if retrying is not None:
                return self._ended_early(retrying)
        if self.now - self.started >= timeout_s:
            return self._timed_out(output, timeout_s)
        if self.now - self.last_change >= idle_s and not self.idle_examined:
            # Once per quiet spell: the screen is made from the same output, so looking again
            # before the agent writes something new would find the same thing.
            self.idle_examined = True
            return self._examine_quiet(output)
        return None

    def _exited(self, code: int | None) -> AgentOutcome:
        output = strip_terminal_codes(_output_or_empty(self.host, self.name))
        self.failure = classify_agent_output(
            self.agent, output, now=self.wall_clock(), exit_code=code
        )
        state, reason = _ended(self.agent, code, self.failure)
        if state is AgentState.CRASHED and code in _HUNG_UP and self._server_gone():
            # Not the agent's doing: say whose (one agent's `tmux kill-server` ends them all).
            reason = (
                f"{self.agent} was ended with its terminal (exit {code}): the tmux server "
                "stopped under it (`tmux kill-server` by another agent or a person, or its "
                "last session killed)"
            )
        return self._report(state, code, output, reason)

    def _server_gone(self) -> bool:
        gone = getattr(self.host, "server_gone", None)  # a host with a server of its own
        return bool(gone()) if callable(gone) else False

    def _ended_early(self, failure: Failure) -> AgentOutcome:
        """The agent is retrying a limit by itself, with no way to bound it: the harness ends
        the run on that first retry and parks the item, rather than wait out the CLI's own
        backoff (which may outlast the agent's timeout, and ignores the provider's reset)."""
        self.host.kill(self.name)
        self.failure = failure
        plain = strip_terminal_codes(_output_or_empty(self.host, self.name))
        reason = f"{self.agent} hit a rate limit and began retrying: {failure.describe()}"
        return self._report(AgentState.RATE_LIMITED, None, plain, reason)

    def _timed_out(self, output: str, timeout_s: float) -> AgentOutcome:
        self.host.kill(self.name)
        plain = strip_terminal_codes(output)
        # Only what it said last: a limit it hit and got past earlier is not why it hangs.
        self.failure = classify_agent_output(self.agent, _tail(plain), now=self.wall_clock())
        if self.failure is not None and self.failure.kind in _LIMIT_KINDS:
            reason = f"{self.agent} stopped at a usage limit: {self.failure.describe()}"
            return self._report(AgentState.RATE_LIMITED, None, plain, reason)
        reason = f"{self.agent} still running after {timeout_s:g}s; session killed"
        return self._report(AgentState.TIMEOUT, None, plain, reason)

    def _examine_quiet(self, output: str) -> AgentOutcome | None:
        """A quiet agent has either stopped at a usage limit or is waiting for an answer."""
        plain = strip_terminal_codes(output)
        limit = classify_agent_output(self.agent, _tail(plain), now=self.wall_clock())
        if limit is not None and limit.kind in _LIMIT_KINDS:
            # An interactive agent that hit its window waits for the reset by itself;
            # the item is better parked than left holding a worker for hours.
            self.host.kill(self.name)
            self.failure = limit
            reason = f"{self.agent} stopped at a usage limit: {limit.describe()}"
            return self._report(AgentState.RATE_LIMITED, None, plain, reason)
        try:
            screen = self.host.screen(self.name, 50)
        except SessionNotFound:
            return None  # it ended meanwhile (its tmux server killed?): the next look says how
        if looks_like_prompt(screen):
            question = _last_line(screen)
            self.on_state(
                AgentState.WAITING_FOR_INPUT,
                f"{self.agent} is waiting for input: {question!r} "
                f"(attach: {shlex.join(self.host.attach_command(self.name))})",
            )
        return None

    def _report(
        self, state: AgentState, code: int | None, output: str, reason: str
    ) -> AgentOutcome:
        """Tell `on_state` how the run ended and return the outcome."""
        self.on_state(state, reason)
        return AgentOutcome(
            state,
            code,
            self.clock() - self.started,
            _tail(output),
            self.failure,
            reason,
            self.name,
            self.log_path if not self.adopted or self.log_path.exists() else None,
            self.adopted,
        )


def _give_own_tmp(
    host: SessionHost,
    state_dir: Path,
    session: str,
    source: Mapping[str, str],
    env: dict[str, str],
) -> Path | None:
    """Make the session's own temporary folder and name it TMPDIR in `env`; None on a remote
    host, whose agent runs on another machine, where this one's folders are not."""
    if host.kind == "remote":
        return None
    tmp = own_tmp(state_dir, session, source.get("TMPDIR"))
    env["TMPDIR"] = str(tmp)
    return tmp


def _still_there(host: SessionHost, name: str) -> bool:
    """Whether session `name` may still be there (True when the host cannot say)."""
    try:
        return host.exists(name)
    except (SessionError, OSError):
        return True


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


def missing_reason(preset: AgentPreset) -> str:
    """Why the preset's program cannot be started: a path names no file, or no program it may
    run; a bare name is not on PATH (then how to install it)."""
    binary = preset.binary
    if "/" not in binary:
        how = preset.install_hint  # a command, or (a command of the user's own) words
        said = how if how.lower().startswith("make sure") else f"install it with: {how}"
        return f"{binary} not found on PATH; {said}"
    if not os.path.isfile(binary):
        return f"{binary} does not exist"
    fix = f"chmod +x {shlex.quote(binary)}, or name its interpreter first"
    return f"{binary} is not executable ({fix})"


# How a program ends when its terminal goes: SIGHUP (129) or SIGTERM (143), as its wrapper
# recorded it. (No status at all is said as such: its session was killed under it.)
_HUNG_UP = (129, 143)


def _ended(agent: str, code: int | None, failure: Failure | None) -> tuple[AgentState, str]:
    # A burst the agent waited out and got past does not undo a clean exit; a spent window or
    # cap does, whatever the exit code says.
    got_past = code == 0 and failure is not None and failure.kind is FailureKind.BURST
    silent = agent in _SILENT_EXIT_AGENTS and code == 0 and failure is not None
    if silent and failure is not None and failure.kind not in _RATE_KINDS:
        # aider exits 0 after a provider refused it: the failure it printed is how it ended.
        return AgentState.CRASHED, f"{agent} exited 0 but reported: {failure.describe()}"
    got_past = got_past and not silent
    if failure is not None and failure.kind in _RATE_KINDS and not got_past:
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
    wall_clock: Callable[[], float] = time.time,
    adopt_ended: bool = False,
) -> SessionRun:
    """Run a CLI agent (as implementer or reviewer) in its own home, then close the session
    once the program has ended: its screen lives on in the log, which is read back whole.
    `wall_clock` is the clock a reset its output names is read by (the caller's, which then
    waits for it)."""
    from agent_harness.agents.runner import AgentState, run_agent

    setup = agent_setup(preset, home, env_source, model=model, own_login=own_login)
    exclude_scratch(preset, workdir)
    tmp = _give_own_tmp(host, state_dir, session, env_source, setup.env)
    try:
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
            model=setup.model,
            extra_env_allow=setup.allow,
            wall_clock=wall_clock,
            on_state=on_state or (lambda _state, _detail: None),
            adopt_ended=adopt_ended,
        )
    except Exception:
        # The watch failed. With its session gone too, nothing will use the folder again
        # (a session still there keeps it, for the run that picks it up).
        if tmp is not None and not _still_there(host, session):
            remove_own_tmp(tmp)
        raise
    if AgentState(outcome.state) is not AgentState.WAITING_FOR_INPUT:
        host.kill(outcome.session or session)
        if tmp is not None:
            remove_own_tmp(tmp)
    output = outcome.output_tail
    if outcome.log_path is not None and outcome.log_path.is_file():
        output = read_log(outcome.log_path)
    return SessionRun(outcome, output)
