"""The real Claude Code and Codex CLIs work items through the pipeline; only the model is scripted.

Each test runs the pinned npm binaries in real worktrees of a forge repository. The providers
record every request, so the tests assert on what the CLIs really sent: the failing check output
going back to the implementer, the verdicts, the rate limit, the refused permissions.
"""

from __future__ import annotations

import dataclasses
import os
import subprocess
import time

import pytest

from agent_harness.agents.presets import PRESETS
from agent_harness.pipeline.budgets import format_usd
from agent_harness.pipeline.run import Pipeline
from agent_harness.testing.model_server import ScriptedFailure
from agent_harness.testing.provider import (
    EditFile,
    Exchange,
    Fail,
    Say,
    Step,
    WriteFile,
    verdict,
)

from .conftest import Rig

pytestmark = [pytest.mark.npm, pytest.mark.acceptance]

PLAN = """\
### A1: Shout helper
Add `shout(text)` to `tally/shout.py`: the text upper-cased, then an exclamation mark.

check: `python -c "from tally.shout import shout; r = shout('hi'); assert r == 'HI!', r"`

### A2: Whisper helper
Add `whisper(text)` to `tally/whisper.py`: the text lower-cased, then three dots.

check: `python -c "from tally.whisper import whisper; r = whisper('HI'); assert r == 'hi...', r"`

### A3: Echo helper
Add `echo(text)` to `tally/echo.py`: the text twice, separated by a space.

check: `python -c "from tally.echo import echo; r = echo('a'); assert r == 'a a', r"`
"""

SHOUT = "def shout(text):\n    return text.upper() + '!'\n"
WHISPER_WRONG = "def whisper(text):\n    return text.lower()\n"
ECHO = "def echo(text):\n    return f'{text} {text}'\n"
DOCSTRING = "Say it twice."
NO_DOCSTRING = f"echo needs the docstring {DOCSTRING!r}"


def implementer(exchange: Exchange) -> Step:
    """One change per conversation, decided from the prompt (the item, and any feedback)."""
    if exchange.side:
        return Say("ok")
    if exchange.turn > 0:
        return Say("Done: the change is in place.")
    text = exchange.user_text
    if "Work item A1" in text:
        return WriteFile("tally/shout.py", SHOUT)
    if "Work item A2" in text:
        if "AssertionError: hi" in text:  # the check output of the first attempt came back
            return EditFile(
                "tally/whisper.py", "    return text.lower()", "    return text.lower() + '...'"
            )
        return WriteFile("tally/whisper.py", WHISPER_WRONG)
    if "Work item A3" in text:
        if NO_DOCSTRING in text:  # the reviewer's reason came back
            return EditFile(
                "tally/echo.py", "def echo(text):", f'def echo(text):\n    """{DOCSTRING}"""'
            )
        return WriteFile("tally/echo.py", ECHO)
    return Say("I do not know this item.")


def reviewer(exchange: Exchange) -> Step:
    # Every call is the review itself: a reviewer may be offered no tools at all.
    text = exchange.user_text
    if "tally/echo.py" in text and DOCSTRING not in text:
        return verdict(False, [NO_DOCSTRING])
    return verdict(True, ["does what the item asks"])


def test_claude_implements_codex_reviews_three_items(rig: Rig) -> None:
    rig.anthropic.scenario = implementer
    rig.openai.scenario = reviewer
    pipeline = rig.pipeline(
        PLAN,
        implementer=rig.agent("claude"),
        reviewer=rig.agent("codex", reviewer=True),
        workers=3,  # the items side by side, as a run works them
    )
    report = pipeline.run()

    assert [(i.id, i.state, i.attempts) for i in report.items] == [
        ("A1", "pr_open", 1),
        ("A2", "pr_open", 2),
        ("A3", "pr_open", 2),
    ], [i.reason for i in report.items]
    assert sorted(p.title for p in rig.pulls()) == [
        "A1: Shout helper",
        "A2: Whisper helper",
        "A3: Echo helper",
    ]
    # The failing check's output reached Claude Code in the second attempt's request only.
    a2 = [r for r in rig.anthropic.model_requests() if "Work item A2" in r.text]
    assert a2 and "AssertionError" not in a2[0].text
    assert any("AssertionError: hi" in r.text for r in a2)
    # Codex said no once, with a structured verdict, and the reason went back to Claude Code.
    verdicts = [(e["approved"], e["reasons"]) for e in rig.events(pipeline, "A3", "review")]
    assert verdicts == [(False, [NO_DOCSTRING]), (True, ["does what the item asks"])]
    assert any(NO_DOCSTRING in r.text for r in rig.anthropic.model_requests())
    # Codex reviewed diffs, never Claude Code's transcript.
    reviews = rig.openai.model_requests()
    assert reviews and all("Done: the change is in place." not in r.text for r in reviews)
    assert any("diff --git" in r.text for r in reviews)
    # Tokens and cost come from Claude Code's own result event, and reach the PR.
    [finished] = rig.events(pipeline, "A1", "agent_finished")
    assert finished["tokens_in"] and finished["tokens_out"] and finished["cost_usd"] > 0
    a1_pull = next(p for p in rig.pulls() if p.title.startswith("A1"))
    assert f"| {format_usd(finished['cost_usd'])} |" in a1_pull.body
    # The agents kept their homes under the harness state, not in the user's home.
    assert not (rig.tmp / "user-home").exists()
    assert list(rig.state_dir.glob("items/A1/agent-home/claude/.claude*"))
    # Their temporary files (Claude Code unpacks a 5.5 MB library at each start) went to
    # folders of their own, removed with each session: nothing left in the machine's folder
    # but the empty one that holds them.
    machine = rig.tmp / "machine-tmp"
    assert [p.name for p in machine.iterdir()] == [f"agent-harness-{os.getuid()}"]
    assert list((machine / f"agent-harness-{os.getuid()}").iterdir()) == []


def test_codex_implements_claude_reviews(rig: Rig) -> None:
    rig.openai.scenario = implementer
    rig.anthropic.scenario = reviewer
    plan = PLAN.split("### A2")[0] + "### A3" + PLAN.split("### A3")[1]
    pipeline = rig.pipeline(
        plan, implementer=rig.agent("codex"), reviewer=rig.agent("claude", reviewer=True), workers=2
    )
    report = pipeline.run()

    assert [(i.id, i.state, i.attempts) for i in report.items] == [
        ("A1", "pr_open", 1),
        ("A3", "pr_open", 2),
    ]
    assert len(rig.pulls()) == 2
    # Codex wrote with its apply_patch tool, and the reviewer's no came back to it.
    calls = [r for r in rig.openai.model_requests() if "custom_tool_call" in r.text]
    assert calls and any("*** Begin Patch" in r.text for r in calls)
    assert any(NO_DOCSTRING in r.text for r in rig.openai.model_requests())
    verdicts = [e["approved"] for e in rig.events(pipeline, "A3", "review")]
    assert verdicts == [False, True]
    assert all("diff --git" in r.text for r in rig.anthropic.model_requests())
    # Codex reports tokens but no price: the cost is unknown, not zero.
    [finished] = rig.events(pipeline, "A1", "agent_finished")
    assert finished["tokens_in"] and finished["cost_usd"] is None


def test_a_rejected_window_parks_the_item_until_its_reset(rig: Rig) -> None:
    reset = int(time.time()) + 3600
    rig.anthropic.scenario = lambda _: Fail(ScriptedFailure.anthropic_unified_window(reset))
    # Claude Code reports the reset time only to a subscription login (rate_limit_event).
    del rig.env["ANTHROPIC_API_KEY"]
    rig.env["CLAUDE_CODE_OAUTH_TOKEN"] = "sk-ant-oat01-scripted"
    pipeline = rig.pipeline(
        PLAN.split("### A2")[0],
        implementer=rig.agent("claude"),
        reviewer=rig.agent("codex", reviewer=True),
    )
    report = pipeline.run()

    [item] = report.items
    assert (item.state, item.attempts, item.not_before) == ("waiting", 0, reset)
    [waiting] = rig.events(pipeline, "A1", "waiting")
    assert waiting["until"] == reset
    [finished] = rig.events(pipeline, "A1", "agent_finished")
    assert (finished["state"], finished["failure"]) == ("rate_limited", "window")
    assert rig.pulls() == [] and rig.openai.model_requests() == []


def test_a_rate_limit_without_a_reset_time_still_waits_and_burns_no_attempt(rig: Rig) -> None:
    rig.anthropic.scenario = lambda _: Fail(ScriptedFailure.anthropic_rate_limit(retry_after=0))
    pipeline = rig.pipeline(
        PLAN.split("### A2")[0],
        implementer=rig.agent("claude"),
        reviewer=rig.agent("codex", reviewer=True),
    )
    before = time.time()
    report = pipeline.run()

    [item] = report.items
    assert (item.state, item.attempts) == ("waiting", 0)
    assert item.not_before is not None and item.not_before >= before + 60
    [finished] = rig.events(pipeline, "A1", "agent_finished")
    assert finished["state"] == "rate_limited" and "429" in finished["reason"]


def test_claude_without_edit_permission_fails_the_item_with_its_denials(rig: Rig) -> None:
    rig.anthropic.scenario = implementer
    rig.openai.scenario = reviewer
    claude = rig.agent("claude")
    template = [
        p for p in PRESETS["claude"].template if p not in ("--permission-mode", "acceptEdits")
    ]
    claude.preset = dataclasses.replace(PRESETS["claude"], template=tuple(template))
    pipeline = rig.pipeline(
        PLAN.split("### A2")[0], implementer=claude, reviewer=rig.agent("codex", reviewer=True)
    )
    report = pipeline.run()

    [item] = report.items
    assert (item.state, item.attempts) == ("failed", 1)
    assert item.reason is not None and "not allowed to work: Write" in item.reason
    assert "tally/shout.py" in item.reason
    assert rig.pulls() == [] and rig.openai.model_requests() == []


def test_codex_in_a_read_only_sandbox_fails_the_item_with_the_refusal(rig: Rig) -> None:
    rig.openai.scenario = implementer
    rig.anthropic.scenario = reviewer
    codex = rig.agent("codex")
    template = ["read-only" if p == "workspace-write" else p for p in PRESETS["codex"].template]
    codex.preset = dataclasses.replace(PRESETS["codex"], template=tuple(template))
    pipeline = rig.pipeline(
        PLAN.split("### A2")[0], implementer=codex, reviewer=rig.agent("claude", reviewer=True)
    )
    report = pipeline.run()

    [item] = report.items
    assert (item.state, item.attempts) == ("failed", 1)
    assert item.reason is not None and "read-only sandbox" in item.reason
    assert rig.pulls() == []


def first_item(rig: Rig, implementer: str, reviewer: str) -> Pipeline:
    """A pipeline of item A1 alone, worked and reviewed by the named real CLIs."""
    return rig.pipeline(
        PLAN.split("### A2")[0],
        implementer=rig.agent(implementer),
        reviewer=rig.agent(reviewer, reviewer=True),
    )


def test_codex_with_its_own_default_model_edits_through_code_mode(rig: Rig) -> None:
    # No --model: Codex 0.171 offers its default model no `tools` at all, but one `exec` tool
    # (in an `additional_tools` input item) whose JavaScript calls apply_patch.
    rig.openai.scenario = implementer
    rig.anthropic.scenario = reviewer
    pipeline = rig.pipeline(
        PLAN.split("### A2")[0],
        implementer=rig.agent("codex", its_default_model=True),
        reviewer=rig.agent("claude", reviewer=True),
    )
    report = pipeline.run()

    [item] = report.items
    assert (item.state, item.attempts) == ("pr_open", 1), item.reason
    [first, *_] = rig.openai.model_requests()
    assert first.body["model"] == "gpt-6.2-sol" and "tools" not in first.body
    calls = [r for r in rig.openai.model_requests() if "tools.apply_patch" in r.text]
    assert calls and "*** Add File: tally/shout.py" in calls[0].text


BAD_OPENAI_KEY = ScriptedFailure.openai(
    401,
    "Incorrect API key provided: sk-scr***ted. You can find your API key at "
    "https://platform.openai.com/account/api-keys.",
    "invalid_request_error",
    "invalid_api_key",
)


def test_codexs_plain_429_parks_its_item_and_a_bad_key_fails_its_item_after_one_attempt(
    rig: Rig,
) -> None:
    """Two items side by side, each with its own failure: A1's provider answers 429, A2's 401."""

    def play(exchange: Exchange) -> Step:
        if "Work item A1" in exchange.user_text:
            return Fail(ScriptedFailure.openai_rate_limit(retry_after=30))
        return Fail(BAD_OPENAI_KEY)

    rig.openai.scenario = play
    pipeline = rig.pipeline(
        PLAN.split("### A3")[0],
        implementer=rig.agent("codex"),
        reviewer=rig.agent("claude", reviewer=True),
        workers=2,
    )
    before = time.time()
    report = pipeline.run()

    limited, refused = report.items
    # Codex prints only "exceeded retry limit, last status: 429 Too Many Requests": the
    # retry-after the provider sent does not reach its output, so the item waits a minute.
    assert (limited.id, limited.state, limited.attempts) == ("A1", "waiting", 0), limited.reason
    assert limited.not_before is not None
    assert before + 60 <= limited.not_before <= time.time() + 66
    [finished] = rig.events(pipeline, "A1", "agent_finished")
    assert (finished["state"], finished["failure"]) == ("rate_limited", "burst")
    a1 = [r for r in rig.openai.model_requests() if "Work item A1" in r.text]
    assert len(a1) == 1  # one run, not three
    # A bad key: the item fails after its one attempt, with the provider's words.
    assert (refused.id, refused.state, refused.attempts) == ("A2", "failed", 1)
    assert refused.reason is not None and "Incorrect API key provided" in refused.reason
    [finished] = rig.events(pipeline, "A2", "agent_finished")
    assert (finished["state"], finished["failure"], finished["permanent"]) == (
        "refused",
        "auth",
        True,
    )


def test_a_codex_reviewer_with_a_bad_key_is_not_a_reviewer_that_said_no(rig: Rig) -> None:
    rig.anthropic.scenario = implementer
    rig.openai.scenario = lambda _: Fail(BAD_OPENAI_KEY)
    pipeline = first_item(rig, "claude", "codex")
    report = pipeline.run()

    [item] = report.items
    assert (item.state, item.attempts) == ("failed", 1)
    assert item.reason is not None and item.reason.startswith("reviewer failed: ")
    assert "auth from codex 401" in item.reason
    # No verdict was recorded or fed back, the implementer ran once, the reviewer was asked once.
    assert rig.events(pipeline, "A1", "feedback") == []
    assert len(rig.events(pipeline, "A1", "agent_finished")) == 1
    assert len(rig.openai.model_requests()) == 1


def test_a_rate_limited_claude_reviewer_keeps_the_checked_commit_waiting(rig: Rig) -> None:
    rig.openai.scenario = implementer
    rig.anthropic.scenario = lambda _: Fail(ScriptedFailure.anthropic_rate_limit(retry_after=0))
    pipeline = first_item(rig, "codex", "claude")
    report = pipeline.run()

    [item] = report.items
    assert (item.state, item.attempts) == ("waiting", 0), item.reason
    [checked] = rig.events(pipeline, "A1", "checks_passed")
    [waiting] = rig.events(pipeline, "A1", "waiting")
    assert waiting["reason"].startswith("reviewer: ")
    assert "burst from claude 429 (rate_limit_error)" in waiting["reason"]
    assert rig.events(pipeline, "A1", "feedback") == []
    assert len(rig.events(pipeline, "A1", "agent_finished")) == 1
    # The commit that passed its checks is what waits for the reviewer, in its worktree.
    [tree] = rig.events(pipeline, "A1", "worktree")
    head = subprocess.run(
        ["git", "rev-parse", "HEAD"], cwd=tree["path"], capture_output=True, text=True, check=True
    )
    assert head.stdout.strip() == checked["sha"]
