"""Scripted stand-ins for the parts that do the work: an implementer, a reviewer and checks.

Each plays back what a test wrote down, one entry per call, with no process and no socket, so
the pipeline's stages can be tested in milliseconds. Scripted *programs* run through real
sessions are in `testing.agents`; these are for the logic above them.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from agent_harness.git.worktrees import Worktree
from agent_harness.implement.protocol import EventCallback, ImplementResult, StateCallback
from agent_harness.pipeline.checks import CheckResult, CheckRun
from agent_harness.plan.model import WorkItem
from agent_harness.review.verdict import ReviewReply


@dataclass
class Step:
    """What the implementer does on one call: write files, then end as `result` says."""

    files: Mapping[str, str] = field(default_factory=dict)
    result: ImplementResult = field(
        default_factory=lambda: ImplementResult(ok=True, state="done", reason="exited 0")
    )
    states: Sequence[tuple[str, str]] = ()  # (state, detail) reported while it "runs"


class ScriptedImplementer:
    """Plays `steps` back, one per call (the last one again once they run out)."""

    def __init__(self, steps: Sequence[Step], *, name: str = "scripted", vendor: str = "test"):
        if not steps:
            raise ValueError("a scripted implementer needs at least one step")
        self.steps = list(steps)
        self.name = name
        self.vendor = vendor
        self.calls: list[dict[str, Any]] = []

    def implement(
        self,
        item: WorkItem,
        tree: Worktree,
        prompt: str,
        *,
        session: str,
        state_dir: Path,
        on_state: StateCallback,
        feedback: str | None = None,
        on_event: EventCallback | None = None,
        resume: bool = False,
        allowance_usd: float | None = None,
    ) -> ImplementResult:
        step = self.steps[min(len(self.calls), len(self.steps) - 1)]
        self.calls.append(
            {
                "item": item.id,
                "prompt": prompt,
                "session": session,
                "feedback": feedback,
                "allowance_usd": allowance_usd,
            }
        )
        for state, detail in step.states:
            on_state(state, detail)
        for name, text in step.files.items():
            target = tree.path / name
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(text, encoding="utf-8")
        return step.result


def verdict(approved: bool, *reasons: str, permanent: bool = False, **usage: Any) -> ReviewReply:
    """A reviewer's answer carrying a well-formed verdict."""
    text = json.dumps({"approved": approved, "reasons": list(reasons), "permanent": permanent})
    return ReviewReply(text=text, **usage)


class ScriptedReviewer:
    """Answers each review with the next of `replies` (a reply, or an exception to raise)."""

    def __init__(self, replies: Sequence[ReviewReply | Exception], *, vendor: str = "other"):
        self.replies = list(replies)
        self.vendor = vendor
        self.prompts: list[str] = []

    def ask(self, prompt: str, system: str) -> ReviewReply:
        if len(self.prompts) >= len(self.replies):
            raise AssertionError(f"the reviewer was asked {len(self.prompts) + 1} times")
        reply = self.replies[len(self.prompts)]
        self.prompts.append(prompt)
        if isinstance(reply, Exception):
            raise reply
        return reply


def passed(command: str, seconds: float = 0.1) -> CheckResult:
    return CheckResult(command, 0, seconds, "ok\n")


def failed(command: str, output: str = "1 failed", code: int = 1) -> CheckResult:
    return CheckResult(command, code, 0.1, output)


class ScriptedChecks:
    """A check runner that answers each command from `outcomes` (command -> a result per run,
    the last one again once they run out); a command with no script passes."""

    def __init__(self, outcomes: Mapping[str, Sequence[CheckResult]] | None = None) -> None:
        self.outcomes = {command: list(results) for command, results in (outcomes or {}).items()}
        self.runs: list[list[str]] = []
        self.envs: list[dict[str, str]] = []

    def __call__(
        self,
        commands: Sequence[str],
        cwd: Path,
        *,
        timeout_s: float,
        env: Mapping[str, str],
        stop_on_failure: bool = True,
        clock: Callable[[], float] | None = None,
        group_file: Path | None = None,
    ) -> CheckRun:
        self.runs.append(list(commands))
        self.envs.append(dict(env))
        results: list[CheckResult] = []
        for index, command in enumerate(commands):
            script = self.outcomes.get(command)
            ran = sum(command in run for run in self.runs[:-1])
            result = script[min(ran, len(script) - 1)] if script else passed(command)
            results.append(result)
            if stop_on_failure and not result.passed:
                return CheckRun(tuple(results), tuple(commands[index + 1 :]))
        return CheckRun(tuple(results))
