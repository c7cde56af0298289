"""The real Gemini CLI, opencode and aider work items through the pipeline; only the model is
scripted.

One pipeline per CLI, three items worked side by side: A1 is done and reviewed into a PR, A2's
provider answers 429 with an hour's retry-after (the item waits, no attempt spent, and the CLI is
not left retrying it), A3's answers 401 (the item fails at once). The pinned CLIs come from npm
(Gemini CLI, opencode) and PyPI (aider) into the same cache as Claude Code and Codex.
"""

from __future__ import annotations

import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass

import pytest

from agent_harness.testing.provider import Exchange, Fail, ScriptedProvider, Step
from agent_harness.testing.scripted_turns import ScriptedFailure

from .conftest import Rig
from .test_real_agents import BAD_OPENAI_KEY, PLAN, implementer, reviewer

pytestmark = [pytest.mark.npm, pytest.mark.acceptance, pytest.mark.slow]

HOUR = 3600


@dataclass(frozen=True)
class Case:
    provider: Callable[[Rig], ScriptedProvider | None]
    rate_limit: ScriptedFailure
    bad_key: ScriptedFailure
    reviewer: str
    retrying: str  # how the run that hit the 429 ended, in the agent_finished reason


CASES = {
    "gemini": Case(
        lambda rig: rig.google,
        ScriptedFailure.gemini_rate_limit(retry_after=HOUR),
        ScriptedFailure.gemini_bad_key(),
        "codex",
        "gemini hit a rate limit: burst from gemini 429",
    ),
    "opencode": Case(
        lambda rig: rig.anthropic,
        ScriptedFailure.anthropic_rate_limit(retry_after=HOUR),
        ScriptedFailure.anthropic_auth(),
        "codex",
        "opencode hit a rate limit and began retrying",
    ),
    "aider": Case(
        lambda rig: rig.openai,
        ScriptedFailure.openai_rate_limit(retry_after=HOUR),
        BAD_OPENAI_KEY,
        "claude",
        "aider hit a rate limit and began retrying",
    ),
}


def three_items(case: Case) -> Callable[[Exchange], Step]:
    def play(exchange: Exchange) -> Step:
        if "Work item A2" in exchange.user_text:
            return Fail(case.rate_limit)
        if "Work item A3" in exchange.user_text:
            return Fail(case.bad_key)
        return implementer(exchange)

    return play


@pytest.mark.parametrize("agent", sorted(CASES))
def test_a_real_cli_works_one_item_waits_at_a_429_and_fails_at_a_401(
    other_rig: Rig, agent: str
) -> None:
    case = CASES[agent]
    provider = case.provider(other_rig)
    assert provider is not None
    provider.scenario = three_items(case)
    review_side = other_rig.openai if case.reviewer == "codex" else other_rig.anthropic
    review_side.scenario = reviewer
    pipeline = other_rig.pipeline(
        PLAN,
        implementer=other_rig.agent(agent),
        reviewer=other_rig.agent(case.reviewer, reviewer=True),
        workers=3,
    )
    before = time.time()
    report = pipeline.run()

    states = sorted((i.id, i.state, i.attempts) for i in report.items)
    assert states == [
        ("A1", "pr_open", 1),
        ("A2", "waiting", 0),
        ("A3", "failed", 1),
    ], [(i.id, i.reason) for i in report.items]
    # A1: the PR holds the item's file and nothing the CLI left behind (.aider*, .gitignore).
    assert [p.title for p in other_rig.pulls()] == ["A1: Shout helper"]
    [tree] = other_rig.events(pipeline, "A1", "worktree")
    changed = subprocess.run(
        ["git", "diff", "--name-only", "HEAD~1", "HEAD"],
        cwd=tree["path"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()
    assert changed == ["tally/shout.py"]
    # A2: parked for later, with the run ended at the limit instead of the CLI retrying it.
    [waiting] = [i for i in report.items if i.id == "A2"]
    assert waiting.not_before is not None and waiting.not_before >= before + 60
    [limited] = other_rig.events(pipeline, "A2", "agent_finished")
    assert (limited["state"], limited["failure"]) == ("rate_limited", "burst")
    assert limited["reason"].startswith(case.retrying), limited["reason"]
    # A3: a bad key ends the item after one run; no review was asked for it.
    [refused] = other_rig.events(pipeline, "A3", "agent_finished")
    assert (refused["state"], refused["failure"], refused["permanent"]) == (
        "refused",
        "auth",
        True,
    )
    # The CLIs kept their homes and settings under the harness's state, never the user's.
    assert not (other_rig.tmp / "user-home").exists()
    if agent == "gemini":
        paths = {r.path for r in provider.model_requests()}
        assert paths == {"/v1beta/models/gemini-2.5-flash:streamGenerateContent?alt=sse"}
        settings = "items/*/agent-home/gemini/gemini/.gemini/settings.json"
        assert list(other_rig.state_dir.glob(settings))
    if agent == "aider":
        # It found a git identity of the run's own, so it wrote none into the shared config.
        assert "Your Name" not in (other_rig.work / ".git" / "config").read_text()
    if agent == "opencode":
        assert {r.path for r in provider.model_requests()} == {"/v1/messages"}
        # Nor did it download its plugin package from npm into each item's home (95 MB each).
        homes = list(other_rig.state_dir.glob("items/*/agent-home/opencode"))
        assert len(homes) == 3
        assert not [h for h in homes if (h / ".npm").exists()]
