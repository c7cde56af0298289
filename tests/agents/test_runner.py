"""run_agent over real sessions with scripted agents; idle and timeout on an injected clock."""

from __future__ import annotations

import dataclasses
import json
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from agent_harness.agents.presets import MAX_PROMPT_ARG_BYTES, PRESETS, AgentPreset
from agent_harness.agents.runner import AgentState, run_agent
from agent_harness.errors import UsageError
from agent_harness.models.failures import FailureKind
from agent_harness.sessions.protocol import SessionHost, SessionSpec
from agent_harness.testing.agents import write_scripted_agent
from agent_harness.testing.clock import FakeClock
from tests.shared.sessions import base_env, logged_tmux, wait_for


class AgentPacedClock(FakeClock):
    """The shared fake clock, held still until a real agent process has got somewhere.

    Until `ready` says so, a sleep waits briefly for real instead of moving the clock, so a
    slow machine cannot make an idle or a timeout come early.
    """

    def __init__(self, ready: Callable[[], bool]) -> None:
        super().__init__(start=1000.0)
        self.ready = ready

    def sleep(self, seconds: float) -> None:
        if not self.ready():
            time.sleep(0.01)
            return
        super().sleep(seconds)


def log_shows(state_dir: Path, name: str, text: str) -> Callable[[], bool]:
    log = state_dir / "logs" / f"{name}.log"
    return lambda: log.exists() and text in log.read_text(errors="replace")


class AnsweredClock(AgentPacedClock):
    """Runs while the agent sits at its question (so its quiet spell is seen); once the test
    has answered, holds still until the real agent has ended (or a real half-minute has gone
    by), so a loaded machine cannot turn a slow reply into a timeout."""

    def __init__(self, host: SessionHost, state_dir: Path, name: str) -> None:
        self.host, self.name = host, name
        self.at_question = log_shows(state_dir, name, "[y/N]")
        self.answered_at: float | None = None
        super().__init__(self._ready)

    def _ready(self) -> bool:
        if self.answered_at is None:
            return self.at_question()
        waited = time.monotonic() - self.answered_at
        return not self.host.status(self.name).alive or waited > 30

    def answered(self) -> None:
        self.answered_at = time.monotonic()


def scripted(agents_dir: Path, behaviour: dict[str, Any] | str, **changes: Any) -> AgentPreset:
    """The claude preset (its env allow-list and name), running a scripted agent instead."""
    argv = write_scripted_agent(agents_dir, behaviour)
    return dataclasses.replace(
        PRESETS["claude"], binary=argv[0], template=(*argv, "{prompt}"), **changes
    )


def run(
    host: SessionHost,
    preset: AgentPreset,
    work: Path,
    state_dir: Path,
    name: str,
    fake: FakeClock | None = None,
    **kwargs: Any,
) -> Any:
    options: dict[str, Any] = {
        "session": name,
        "worktree": work,
        "prompt": "Fix the bug.",
        "state_dir": state_dir,
        "env_source": base_env(),
        "timeout_s": 600.0,
        "idle_s": 5.0,
        "poll_s": 0.02,
    }
    if fake is not None:
        # Fake seconds cost nothing, but every poll of a real session costs real work.
        options.update(clock=fake, sleep=fake.sleep, poll_s=1.0)
    options.update(kwargs)
    return run_agent(host, preset, **options)


def test_a_finished_agent_is_done_and_got_the_prompt_as_one_argument(
    host: SessionHost, name: str, work: Path, state_dir: Path, agents_dir: Path
) -> None:
    prompt = 'Fix "the" bug;\n$(rm -rf /) `and` keep  spaces'
    preset = scripted(agents_dir, {"steps": [{"argv_dump": "argv.json"}, {"print": "ok"}]})
    outcome = run(host, preset, work, state_dir, name, prompt=prompt)

    assert outcome.state is AgentState.DONE
    assert outcome.exit_code == 0
    assert outcome.failure is None
    assert "ok" in outcome.output_tail
    assert json.loads((work / "argv.json").read_text()) == [prompt]
    assert (state_dir / "prompts" / f"{name}.md").read_text() == prompt


def test_a_failing_agent_is_crashed_with_its_exit_code(
    local_host: SessionHost, name: str, work: Path, state_dir: Path, agents_dir: Path
) -> None:
    outcome = run(local_host, scripted(agents_dir, "crash"), work, state_dir, name)
    assert outcome.state is AgentState.CRASHED
    assert outcome.exit_code == 3
    assert outcome.reason == "claude exited with status 3"
    assert "the build tool blew up" in outcome.output_tail


def test_an_agent_at_a_question_is_reported_waiting_and_can_be_answered(
    host: SessionHost, name: str, work: Path, state_dir: Path, agents_dir: Path
) -> None:
    fake = AnsweredClock(host, state_dir, name)
    heard: list[tuple[AgentState, str]] = []

    def on_state(state: AgentState, reason: str) -> None:
        heard.append((state, reason))
        if state is AgentState.WAITING_FOR_INPUT:
            host.send_keys(name, "y")  # what a person attaching to the session would do
            fake.answered()

    outcome = run(host, scripted(agents_dir, "ask"), work, state_dir, name, fake, on_state=on_state)
    assert [state for state, _ in heard] == [AgentState.WAITING_FOR_INPUT, AgentState.DONE]
    assert "Apply these changes? [y/N]" in heard[0][1]
    assert outcome.state is AgentState.DONE
    assert (work / "answer.txt").read_text() == "y"


def test_an_agent_still_running_at_the_timeout_is_killed(
    local_host: SessionHost, name: str, work: Path, state_dir: Path, agents_dir: Path
) -> None:
    fake = AgentPacedClock(log_shows(state_dir, name, "thinking"))
    outcome = run(
        local_host,
        scripted(agents_dir, "hang"),
        work,
        state_dir,
        name,
        fake,
        timeout_s=30.0,
    )
    assert outcome.state is AgentState.TIMEOUT
    assert 30.0 <= outcome.duration_s <= 31.0
    assert "thinking" in outcome.output_tail
    assert not local_host.status(name).alive


def test_a_question_without_an_answer_ends_in_timeout_not_a_hang(
    local_host: SessionHost, name: str, work: Path, state_dir: Path, agents_dir: Path
) -> None:
    fake = AgentPacedClock(log_shows(state_dir, name, "[y/N]"))
    heard: list[AgentState] = []
    outcome = run(
        local_host,
        scripted(agents_dir, "ask"),
        work,
        state_dir,
        name,
        fake,
        timeout_s=60.0,
        poll_s=2.0,
        on_state=lambda state, reason: heard.append(state),
    )
    assert heard == [AgentState.WAITING_FOR_INPUT, AgentState.TIMEOUT]
    assert outcome.state is AgentState.TIMEOUT


class GoneBeforeItsScreenIsRead:
    """A real host whose session ends (as when its tmux server is SIGKILLed) between the look
    that finds the agent quiet and the read of its screen."""

    def __init__(self, host: SessionHost) -> None:
        self.host = host

    def __getattr__(self, name: str) -> Any:
        return getattr(self.host, name)

    def screen(self, name: str, lines: int = 50) -> str:
        self.host.kill(name)
        return self.host.screen(name, lines)


def test_a_session_gone_while_its_quiet_agent_is_examined_ends_the_run_not_the_worker(
    local_host: SessionHost, name: str, work: Path, state_dir: Path, agents_dir: Path
) -> None:
    fake = AgentPacedClock(log_shows(state_dir, name, "thinking"))
    vanishing = GoneBeforeItsScreenIsRead(local_host)
    outcome = run(vanishing, scripted(agents_dir, "hang"), work, state_dir, name, fake)  # type: ignore[arg-type]
    # Said as the end of a session killed under it, for the policy to weigh, not raised as an
    # error out of the watch (which skipped the outcome, its events and its clean-up).
    assert outcome.state is AgentState.CRASHED
    assert "without an exit status" in outcome.reason
    assert not local_host.status(name).alive


def test_a_claude_rate_limit_event_is_rate_limited_with_its_reset(
    host: SessionHost, name: str, work: Path, state_dir: Path, agents_dir: Path
) -> None:
    outcome = run(host, scripted(agents_dir, "claude_rate_limit"), work, state_dir, name)
    assert outcome.state is AgentState.RATE_LIMITED
    assert outcome.exit_code == 1
    assert outcome.failure is not None
    assert outcome.failure.kind is FailureKind.WINDOW
    assert outcome.failure.reset_at is not None
    assert 3000 < outcome.failure.reset_at - time.time() <= 3600


def test_a_codex_usage_limit_resets_relative_to_the_wall_clock(
    local_host: SessionHost, name: str, work: Path, state_dir: Path, agents_dir: Path
) -> None:
    outcome = run(
        local_host,
        scripted(agents_dir, "codex_usage_limit"),
        work,
        state_dir,
        name,
        wall_clock=FakeClock(start=1_700_000_000.0),
    )
    assert outcome.state is AgentState.RATE_LIMITED
    assert outcome.failure is not None
    assert outcome.failure.reset_at == 1_700_000_000.0 + 7200


def test_an_agent_idling_at_a_usage_limit_is_stopped_as_rate_limited(
    local_host: SessionHost, name: str, work: Path, state_dir: Path, agents_dir: Path
) -> None:
    fake = AgentPacedClock(log_shows(state_dir, name, "resets"))
    behaviour = {
        "steps": [
            {"print": "You've hit your session limit · resets 8:37am (UTC)"},
            {"hang": None},
        ]
    }
    outcome = run(local_host, scripted(agents_dir, behaviour), work, state_dir, name, fake)
    assert outcome.state is AgentState.RATE_LIMITED
    assert outcome.failure is not None and outcome.failure.kind is FailureKind.WINDOW
    assert not local_host.status(name).alive


def test_a_missing_binary_is_reported_without_starting_a_session(
    local_host: SessionHost, name: str, work: Path, state_dir: Path, tmp_path: Path
) -> None:
    empty = tmp_path / "bin"
    empty.mkdir()
    outcome = run(
        local_host,
        PRESETS["claude"],
        work,
        state_dir,
        name,
        env_source={"PATH": str(empty)},
    )
    assert outcome.state is AgentState.MISSING_BINARY
    assert outcome.reason == (
        "claude not found on PATH; install it with: npm install -g @anthropic-ai/claude-code"
    )
    assert not local_host.exists(name)


def test_a_live_session_is_adopted_even_where_the_agent_is_no_longer_on_path(
    local_host: SessionHost,
    name: str,
    work: Path,
    state_dir: Path,
    agents_dir: Path,
    tmp_path: Path,
) -> None:
    # An earlier harness's agent still runs; this one's PATH no longer finds the program.
    earlier = write_scripted_agent(agents_dir, "ask")
    local_host.start(
        SessionSpec(name, earlier, work, base_env(), state_dir / "logs" / f"{name}.log")
    )
    wait_for(lambda: local_host.screen(name).endswith("[y/N]"))
    empty = tmp_path / "bin"
    empty.mkdir()
    fake = AnsweredClock(local_host, state_dir, name)

    def answer(state: AgentState, reason: str) -> None:
        if state is AgentState.WAITING_FOR_INPUT:
            local_host.send_keys(name, "still here")
            fake.answered()

    outcome = run(
        local_host, PRESETS["claude"], work, state_dir, name, fake,
        env_source={"PATH": str(empty)}, on_state=answer,
    )  # fmt: skip
    assert outcome.adopted  # watched to its end, not reported missing and left running
    assert outcome.state is AgentState.DONE
    assert (work / "answer.txt").read_text() == "still here"
    assert not (state_dir / "prompts" / f"{name}.md").exists()  # nothing new was started


@pytest.mark.acceptance
def test_a_tmux_agent_is_started_in_one_tmux_call_not_three(
    tmux_socket: str, name: str, work: Path, state_dir: Path, agents_dir: Path, tmp_path: Path
) -> None:
    # Each tmux call is a process of its own, a few milliseconds, and every item pays them.
    host, calls = logged_tmux(tmp_path, tmux_socket)
    outcome = run_agent(
        host, scripted(agents_dir, "done"), session=name, worktree=work, prompt="Fix it.",
        state_dir=state_dir, env_source=base_env(), timeout_s=60.0, idle_s=5.0, poll_s=0.02,
    )  # fmt: skip
    assert outcome.state is AgentState.DONE
    assert (work / "DONE.txt").exists()
    made = calls()
    # was: has-session (the runner's look for an earlier one), has-session again (start's).
    # No log of the name yet: nothing of it can be running. (The watch may ask how the pane
    # is, `list-panes`, when the agent takes longer than a quarter second, as under load.)
    assert made[0] == "new-session" and made.count("new-session") == 1
    assert "has-session" not in made


def test_the_agent_sees_its_own_key_and_never_the_tracker_token(
    local_host: SessionHost, name: str, work: Path, state_dir: Path, agents_dir: Path
) -> None:
    source = {
        **base_env(),
        "HOME": "/home/agent",
        "LC_ALL": "C.UTF-8",
        "ANTHROPIC_API_KEY": "sk-ant-test",
        "ANTHROPIC_BASE_URL": "http://127.0.0.1:9",
        "OPENAI_API_KEY": "sk-openai-test",
        "GH_TOKEN": "ghp_secret",
        "GITHUB_TOKEN": "ghs_secret",
        "AGENT_HARNESS_SERVICE_TOKEN": "svc-secret",
        "AWS_SECRET_ACCESS_KEY": "aws-secret",
    }
    preset = scripted(agents_dir, "dump_env")
    outcome = run(local_host, preset, work, state_dir, name, env_source=source)
    assert outcome.state is AgentState.DONE

    seen = json.loads((work / "env.json").read_text())
    assert seen["ANTHROPIC_API_KEY"] == "sk-ant-test"
    assert seen["ANTHROPIC_BASE_URL"] == "http://127.0.0.1:9"
    assert seen["HOME"] == "/home/agent"
    assert seen["LC_ALL"] == "C.UTF-8"
    for secret in (
        "OPENAI_API_KEY",
        "GH_TOKEN",
        "GITHUB_TOKEN",
        "AGENT_HARNESS_SERVICE_TOKEN",
        "AWS_SECRET_ACCESS_KEY",
        "TMUX",
    ):
        assert secret not in seen
    log = (state_dir / "logs" / f"{name}.log").read_text()
    assert "ghp_secret" not in log


def test_a_live_session_of_the_same_name_is_adopted_not_doubled(
    host: SessionHost, name: str, work: Path, state_dir: Path, agents_dir: Path
) -> None:
    # A previous harness process started an agent that is now waiting at a question.
    earlier = write_scripted_agent(agents_dir, "ask")
    host.start(
        SessionSpec(
            name=name,
            command=earlier,
            cwd=work,
            env=base_env(),
            log_path=state_dir / "logs" / f"{name}.log",
        )
    )
    wait_for(lambda: host.screen(name).endswith("[y/N]"))

    fake = AnsweredClock(host, state_dir, name)

    def answer(state: AgentState, reason: str) -> None:
        if state is AgentState.WAITING_FOR_INPUT:
            host.send_keys(name, "adopted")
            fake.answered()

    outcome = run(host, scripted(agents_dir, "done"), work, state_dir, name, fake, on_state=answer)
    assert outcome.adopted
    assert outcome.state is AgentState.DONE
    assert (work / "answer.txt").read_text() == "adopted"
    assert not (work / "DONE.txt").exists()  # the new run's agent never started


def _earlier_agent_at_its_question(
    host: SessionHost,
    name: str,
    work: Path,
    state_dir: Path,
    agents_dir: Path,
    prompt: str | None = "The earlier attempt's prompt.",
) -> None:
    """A previous harness process's agent, started on its own prompt file (None: its file is
    gone since), now asking."""
    if prompt is not None:
        prompts = state_dir / "prompts"
        prompts.mkdir()
        (prompts / f"{name}.md").write_text(prompt)
    earlier = write_scripted_agent(agents_dir, "ask")
    host.start(SessionSpec(name, earlier, work, base_env(), state_dir / "logs" / f"{name}.log"))
    wait_for(lambda: host.screen(name).endswith("[y/N]"))


def _answering(host: SessionHost, name: str, fake: AnsweredClock, text: str) -> Any:
    def answer(state: AgentState, reason: str) -> None:
        if state is AgentState.WAITING_FOR_INPUT:
            host.send_keys(name, text)
            fake.answered()

    return answer


def test_adopting_a_live_session_leaves_its_prompt_file_as_its_agent_read_it(
    host: SessionHost, name: str, work: Path, state_dir: Path, agents_dir: Path
) -> None:
    # aider reads its prompt through --message-file: the live agent's file is its own.
    _earlier_agent_at_its_question(host, name, work, state_dir, agents_dir)
    fake = AnsweredClock(host, state_dir, name)
    outcome = run(
        host, scripted(agents_dir, "done"), work, state_dir, name, fake,
        prompt="A new attempt's prompt.", on_state=_answering(host, name, fake, "kept"),
    )  # fmt: skip
    assert outcome.adopted
    assert outcome.state is AgentState.DONE
    assert (work / "answer.txt").read_text() == "kept"
    assert (state_dir / "prompts" / f"{name}.md").read_text() == "The earlier attempt's prompt."


def test_a_live_session_is_adopted_even_where_the_new_prompt_could_not_be_passed(
    host: SessionHost, name: str, work: Path, state_dir: Path, agents_dir: Path
) -> None:
    # The new attempt's prompt is too long for an argument: nothing new can start, but the
    # agent already running is watched to its end, not left behind by a usage error. (With
    # no earlier prompt file, no look was made before the command was.)
    _earlier_agent_at_its_question(host, name, work, state_dir, agents_dir, prompt=None)
    fake = AnsweredClock(host, state_dir, name)
    outcome = run(
        host, scripted(agents_dir, "done"), work, state_dir, name, fake,
        prompt="x" * (MAX_PROMPT_ARG_BYTES + 1), on_state=_answering(host, name, fake, "long"),
    )  # fmt: skip
    assert outcome.adopted
    assert outcome.state is AgentState.DONE
    assert (work / "answer.txt").read_text() == "long"


def test_a_prompt_too_long_for_an_argument_is_a_usage_error_when_nothing_runs(
    host: SessionHost, name: str, work: Path, state_dir: Path, agents_dir: Path
) -> None:
    with pytest.raises(UsageError, match="too long to pass"):
        run(
            host, scripted(agents_dir, "done"), work, state_dir, name,
            prompt="x" * (MAX_PROMPT_ARG_BYTES + 1),
        )  # fmt: skip
    assert not host.exists(name)


def test_a_limit_the_agent_got_past_does_not_stop_it_later(
    local_host: SessionHost, name: str, work: Path, state_dir: Path, agents_dir: Path
) -> None:
    fake = AgentPacedClock(log_shows(state_dir, name, "still going"))
    behaviour = {
        "steps": [
            {"print": "You've hit your session limit · resets 8:37am (UTC)"},
            {"print": [f"step {i}: " + "x" * 100 for i in range(60)]},
            {"print": "still going"},
            {"hang": None},
        ]
    }
    outcome = run(
        local_host, scripted(agents_dir, behaviour), work, state_dir, name, fake, timeout_s=20.0
    )
    assert outcome.state is AgentState.TIMEOUT
    assert outcome.failure is None


def test_an_agent_retrying_a_rate_limit_by_itself_is_ended_at_its_first_retry(
    host: SessionHost, name: str, work: Path, state_dir: Path, agents_dir: Path
) -> None:
    # aider's own words (recorded from aider 0.86.2), then its backoff, which would go on for
    # a minute and more: the run ends at the first retry instead, rate limited.
    behaviour = {
        "steps": [
            {
                "print": [
                    "litellm.RateLimitError: RateLimitError: OpenAIException - Rate limit "
                    "reached for",
                    "requests",
                    "The API provider has rate limited you. Try again later or check your quotas.",
                    "Retrying in 0.2 seconds...",
                ]
            },
            {"hang": None},
        ]
    }
    argv = write_scripted_agent(agents_dir, behaviour)
    aider = dataclasses.replace(PRESETS["aider"], binary=argv[0], template=(*argv, "{prompt}"))
    outcome = run(host, aider, work, state_dir, name, timeout_s=120.0, idle_s=120.0)

    assert outcome.state is AgentState.RATE_LIMITED
    assert outcome.failure is not None and outcome.failure.kind is FailureKind.BURST
    assert outcome.reason.startswith("aider hit a rate limit and began retrying")
    assert not host.status(name).alive


@pytest.mark.unit
def test_a_program_of_ones_own_that_is_not_there_is_said_in_plain_words() -> None:
    from agent_harness.agents.presets import preset_for
    from agent_harness.agents.runner import missing_reason

    # It said "install it with: make sure nosuchprog is installed and on PATH".
    custom = preset_for("nosuchprog --task {prompt_file}")
    assert (
        missing_reason(custom)
        == "nosuchprog not found on PATH; make sure nosuchprog is installed and on PATH"
    )
    assert missing_reason(PRESETS["codex"]) == (
        "codex not found on PATH; install it with: npm install -g @openai/codex"
    )
