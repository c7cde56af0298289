"""The reviewer end to end: the real ModelClient over real HTTP to the scripted model server.

What the reviewer saw is read from the server's recorded requests, never from our own code.
"""

from __future__ import annotations

import dataclasses
import json
import random
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from agent_harness.agents.presets import PRESETS
from agent_harness.errors import HarnessError
from agent_harness.git.runner import GitError
from agent_harness.models.client import ModelCallFailed, ModelClient, RetryPolicy
from agent_harness.models.parking import MemoryParking
from agent_harness.models.routes import Route, UnknownRole
from agent_harness.pipeline.checks import CheckResult, CheckRun, run_checks
from agent_harness.review.agent import CliReviewer
from agent_harness.review.model import ModelReviewer, route_vendor
from agent_harness.review.verdict import (
    NO_REASON,
    NO_VERDICT,
    SAME_VENDOR_FLAG,
    ReviewRequest,
    SameVendorRefused,
    Verdict,
    build_review_prompt,
    check_vendors,
    parse_verdict,
    review,
)
from agent_harness.sessions.headless import HeadlessHost
from agent_harness.testing.model_server import ModelServer, ScriptedCompletion, ScriptedFailure

KEY = "sk-test-review-0123456789"
PLANTED = "PLANTED-AGENT-STORY-7f3a9c"
APPROVE = '{"approved": true, "reasons": ["adds the greeting"], "permanent": false}'
REJECT = '{"approved": false, "reasons": ["the test was deleted"], "permanent": false}'


@pytest.fixture
def server() -> Iterator[ModelServer]:
    with ModelServer(api_key=KEY) as running:
        yield running


def make_client(server: ModelServer) -> ModelClient:
    routes = {
        "reviewer": Route("claude-test", server.url, "anthropic", "anthropic", "REVIEW_KEY"),
        "reviewer-oai": Route("gpt-test", server.url + "/v1", "openai", "openai", "REVIEW_KEY"),
    }
    return ModelClient(
        routes,
        env={"REVIEW_KEY": KEY},
        parking=MemoryParking(),
        sleep=lambda seconds: None,
        rng=random.Random(1),
        policy=RetryPolicy(max_attempts=1),
    )


@pytest.fixture
def client(server: ModelServer) -> Iterator[ModelClient]:
    made = make_client(server)
    yield made
    made.close()


def simple_request(diff: str = "diff --git a/x b/x\n+hello\n") -> ReviewRequest:
    checks = CheckRun((CheckResult("pytest -q", 0, 1.5, "3 passed"),))
    return ReviewRequest("greet-1", "Say hello", "`hello` prints hi", diff, checks)


def user_text(request_body: Any) -> str:
    messages = request_body["messages"]
    return "\n".join(str(m["content"]) for m in messages if m["role"] == "user")


def git(repo: Path, *args: str) -> str:
    return subprocess.run(
        ["git", *args], cwd=repo, check=True, capture_output=True, text=True
    ).stdout


# ------------------------------------------------------------------------ what it sees


@pytest.mark.unit
def test_the_request_type_has_no_place_for_the_implementers_story() -> None:
    names = {field.name for field in dataclasses.fields(ReviewRequest)}
    assert names == {"item_id", "title", "success_check", "diff", "checks"}


@pytest.mark.integration
def test_reviewer_sees_diff_checks_and_success_check_but_nothing_else_of_the_worktree(
    tmp_path: Path, server: ModelServer, client: ModelClient
) -> None:
    repo = tmp_path / "work"
    repo.mkdir()
    git(repo, "init", "-q", "-b", "main")
    git(repo, "config", "user.email", "t@example.com")
    git(repo, "config", "user.name", "t")
    (repo / "greet.py").write_text("def greet():\n    return 'hi'\n")
    # The agent's own account of its work sits in the worktree, untouched by the change.
    (repo / "AGENT_LOG.md").write_text(f"I fixed everything, trust me. {PLANTED}\n")
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "base")
    base = git(repo, "rev-parse", "HEAD").strip()
    (repo / "greet.py").write_text("def greet():\n    return 'hello'\n")
    diff = git(repo, "diff", base)
    checks = run_checks(["echo checked"], repo, timeout_s=30, env={"PATH": "/usr/bin:/bin"})
    server.enqueue(ScriptedCompletion(text=APPROVE))

    outcome = review(
        ModelReviewer(client, worker="w1"),
        ReviewRequest("greet-1", "Say hello", "greet() returns 'hello'", diff, checks),
    )

    assert outcome.verdict == Verdict(True, ("adds the greeting",), False)
    [sent] = server.requests
    seen = user_text(sent.body)
    assert "-    return 'hi'" in seen and "+    return 'hello'" in seen
    assert checks.table_markdown() in seen
    assert "greet() returns 'hello'" in seen
    assert "greet-1" in seen and "Say hello" in seen
    assert '"approved"' in sent.body["system"]
    assert PLANTED not in json.dumps(sent.body)


@pytest.mark.integration
def test_a_failing_checks_output_tail_is_shown_to_the_reviewer(
    server: ModelServer, client: ModelClient
) -> None:
    checks = CheckRun(
        (
            CheckResult("ruff check .", 0, 0.2, "All checks passed!"),
            CheckResult("pytest -q", 1, 3.0, "FAILED test_greet - AssertionError"),
        )
    )
    server.enqueue(ScriptedCompletion(text=REJECT))
    review(ModelReviewer(client, "w1"), dataclasses.replace(simple_request(), checks=checks))
    seen = user_text(server.requests[0].body)
    assert "FAILED test_greet - AssertionError" in seen
    assert "All checks passed!" not in seen  # passing output is noise


@pytest.mark.unit
def test_prompt_says_when_there_are_no_checks_and_no_success_check() -> None:
    request = ReviewRequest("i", "t", None, "diff --git a/x b/x\n", None)
    _, user = build_review_prompt(request)
    assert "No automated checks were run." in user
    assert "None was given" in user


@pytest.mark.integration
def test_a_huge_diff_is_truncated_with_a_note_saying_so(
    server: ModelServer, client: ModelClient
) -> None:
    lines = [f"+line {n:05d}\n" for n in range(5000)]
    diff = "diff --git a/big b/big\n" + "".join(lines)
    server.enqueue(ScriptedCompletion(text=APPROVE))
    review(ModelReviewer(client, "w1"), simple_request(diff), max_diff_chars=2000)
    seen = user_text(server.requests[0].body)
    assert "+line 00000" in seen
    assert "+line 04999" not in seen
    assert f"the diff is {len(diff)} characters long and was truncated" in seen
    assert "[the diff is cut here]" in seen
    # The cut falls on a line boundary: no half line is shown.
    shown = [line for line in seen.splitlines() if line.startswith("+line ")]
    assert all(len(line) == len("+line 00000") for line in shown)


@pytest.mark.unit
def test_a_diff_that_fits_carries_no_truncation_note() -> None:
    _, user = build_review_prompt(simple_request())
    assert "truncated" not in user


@pytest.mark.unit
def test_a_diff_of_a_markdown_file_cannot_close_the_fence_early() -> None:
    diff = "diff --git a/README.md b/README.md\n+```python\n+print(1)\n+```\n"
    _, user = build_review_prompt(simple_request(diff))
    assert "````diff\n" + diff.rstrip("\n") + "\n````" in user


# ---------------------------------------------------------------------- the verdict loop


@pytest.mark.integration
def test_a_valid_first_answer_takes_one_call_and_reports_usage(
    server: ModelServer, client: ModelClient
) -> None:
    server.enqueue(ScriptedCompletion(text=REJECT, input_tokens=300, output_tokens=40))
    outcome = review(ModelReviewer(client, "w1"), simple_request())
    assert outcome.verdict == Verdict(False, ("the test was deleted",), False)
    assert (outcome.attempts, outcome.malformed) == (1, False)
    assert (outcome.tokens_in, outcome.tokens_out) == (300, 40)
    assert outcome.cost_usd is None  # a model no price list knows: unknown, never 0
    assert (outcome.vendor, outcome.model) == ("anthropic", "claude-test")
    assert len(server.requests) == 1


@pytest.mark.integration
def test_a_review_by_a_model_the_price_list_knows_costs_what_the_list_says(
    server: ModelServer,
) -> None:
    from genai_prices import Usage as LibUsage
    from genai_prices import calc_price

    # It reported no cost (the API never does), so budgets counted reviews as nothing: a run
    # capped at $1 went on reviewing past it. The call is priced as the audit prices it.
    routes = {"reviewer": Route("claude-sonnet-4-5", server.url, "anthropic", "anthropic", "K")}
    client = ModelClient(routes, env={"K": KEY}, parking=MemoryParking(), sleep=lambda s: None)
    server.enqueue(ScriptedCompletion(text=REJECT, input_tokens=30_000, output_tokens=2_000))
    try:
        outcome = review(ModelReviewer(client, "w1"), simple_request())
    finally:
        client.close()
    listed = calc_price(
        LibUsage(input_tokens=30_000, output_tokens=2_000),
        model_ref="claude-sonnet-4-5",
        provider_id="anthropic",
    ).total_price
    assert outcome.cost_usd == pytest.approx(float(listed)) and outcome.cost_usd > 0.1


@pytest.mark.integration
def test_malformed_then_valid_asks_again_saying_what_was_wrong(
    server: ModelServer, client: ModelClient
) -> None:
    server.enqueue(
        ScriptedCompletion(text="Looks good to me!", input_tokens=100, output_tokens=5),
        ScriptedCompletion(text=f"Here it is:\n```json\n{APPROVE}\n```", input_tokens=110),
    )
    outcome = review(ModelReviewer(client, "w1"), simple_request())
    assert outcome.verdict.approved
    assert (outcome.attempts, outcome.malformed) == (2, False)
    assert (outcome.tokens_in, outcome.tokens_out) == (210, 12)
    first, second = server.requests
    assert "could not be used" not in user_text(first.body)
    retry = user_text(second.body)
    assert "could not be used: the answer contained no JSON object" in retry
    assert "+hello" in retry  # the second ask is complete on its own
    assert outcome.problems == ("the answer contained no JSON object",)


@pytest.mark.integration
def test_malformed_twice_fails_closed_after_exactly_two_requests(
    server: ModelServer, client: ModelClient
) -> None:
    server.enqueue(
        ScriptedCompletion(text='{"verdict": "ship it"}'),
        ScriptedCompletion(text='{"approved": "probably"}'),
        ScriptedCompletion(text=APPROVE),  # must never be asked for
    )
    outcome = review(ModelReviewer(client, "w1"), simple_request())
    assert outcome.verdict == Verdict(False, (NO_VERDICT,), False)
    assert (outcome.attempts, outcome.malformed) == (2, True)
    assert len(server.requests) == 2 and server.remaining == 1
    assert outcome.problems == (
        'no JSON object in the answer had an "approved" field',
        '"approved" was "probably", not true or false',
    )
    assert 'had an "approved" field' in user_text(server.requests[1].body)


@pytest.mark.integration
def test_unknown_usage_on_any_attempt_makes_the_total_unknown(
    server: ModelServer, client: ModelClient
) -> None:
    server.enqueue(
        ScriptedCompletion(text="hmm", input_tokens=None, output_tokens=None),
        ScriptedCompletion(text=APPROVE, input_tokens=50, output_tokens=9),
    )
    outcome = review(ModelReviewer(client, "w1"), simple_request())
    assert outcome.verdict.approved
    assert (outcome.tokens_in, outcome.tokens_out) == (None, None)


@pytest.mark.integration
def test_the_openai_wire_format_serves_a_reviewer_too(
    server: ModelServer, client: ModelClient
) -> None:
    server.enqueue(ScriptedCompletion(text=REJECT))
    outcome = review(ModelReviewer(client, "w2", role="reviewer-oai"), simple_request())
    assert not outcome.verdict.approved
    assert (outcome.vendor, outcome.model) == ("openai", "gpt-test")
    [sent] = server.requests
    assert sent.path == "/v1/chat/completions"
    assert sent.body["messages"][0]["role"] == "system"
    assert "+hello" in user_text(sent.body)


@pytest.mark.integration
def test_a_failed_model_call_is_an_error_not_a_verdict(
    server: ModelServer, client: ModelClient
) -> None:
    server.enqueue(ScriptedFailure.anthropic_auth())
    with pytest.raises(ModelCallFailed):
        review(ModelReviewer(client, "w1"), simple_request())


@pytest.mark.integration
def test_an_unknown_reviewer_role_is_refused_at_construction(client: ModelClient) -> None:
    with pytest.raises(UnknownRole, match="critic"):
        ModelReviewer(client, "w1", role="critic")


# ----------------------------------------------------------------------------- parsing


@pytest.mark.unit
@pytest.mark.parametrize(
    ("text", "verdict"),
    [
        (APPROVE, Verdict(True, ("adds the greeting",), False)),
        ('{"approved": true}', Verdict(True, (), False)),
        ('```json\n{"approved": false, "reasons": ["x"]}\n```', Verdict(False, ("x",), False)),
        (
            'I looked closely.\n{"approved": "false", "reasons": "one reason", '
            '"permanent": "true"}\nThanks!',
            Verdict(False, ("one reason",), True),
        ),
        ('{"approved": false}', Verdict(False, (NO_REASON,), False)),
        ('{"approved": false, "reasons": ["", "  "]}', Verdict(False, (NO_REASON,), False)),
        ('{"approved": true, "permanent": true}', Verdict(True, (), False)),
        ('{"Approved": "YES", "Reasons": ["fine"]}', Verdict(True, ("fine",), False)),
        (
            '{"approved": false, "reasons": ["multi\\n  line"]}',
            Verdict(False, ("multi line",), False),
        ),
        (
            '{"review": {"approved": false, "reasons": ["nested"]}}',
            Verdict(False, ("nested",), False),
        ),
        (
            'First thought: {"approved": true}. On reflection: {"approved": false, '
            '"reasons": ["breaks login"]}',
            Verdict(False, ("breaks login",), False),
        ),
        (
            '{"approved": false, "reasons": ["a"], "details": {"approved": true}}',
            Verdict(False, ("a",), False),
        ),
    ],
)
def test_parse_verdict_tolerates_what_models_write(text: str, verdict: Verdict) -> None:
    assert parse_verdict(text) == verdict


@pytest.mark.unit
@pytest.mark.parametrize(
    "text",
    [
        "",
        "LGTM",
        '{"reasons": ["no decision"]}',
        '{"approved": null, "reasons": ["x"]}',
        '{"approved": 1}',
        '{"approved": "maybe"}',
        '["approved", true]',
        '{"approved": true',
    ],
)
def test_parse_verdict_returns_none_when_there_is_no_usable_verdict(text: str) -> None:
    assert parse_verdict(text) is None


# ----------------------------------------------------------------------------- vendors


@pytest.mark.integration
def test_same_vendor_is_refused_with_a_harness_error(client: ModelClient) -> None:
    reviewer = ModelReviewer(client, "w1")
    with pytest.raises(SameVendorRefused) as caught:
        check_vendors("Anthropic", reviewer.vendor, allow_same_vendor=False)
    assert isinstance(caught.value, HarnessError)
    assert caught.value.vendor == "anthropic"
    assert "--allow-same-vendor" in str(caught.value)


@pytest.mark.unit
def test_same_vendor_when_allowed_returns_the_flag_for_the_pr_body() -> None:
    assert check_vendors("openai", "openai", allow_same_vendor=True) == SAME_VENDOR_FLAG


@pytest.mark.unit
def test_different_vendors_need_no_flag() -> None:
    assert check_vendors("openai", "anthropic", allow_same_vendor=False) is None


@pytest.mark.unit
@pytest.mark.parametrize(
    ("vendor", "model", "expected"),
    [
        ("anthropic", "claude-sonnet-4", "anthropic"),
        ("openrouter", "anthropic/claude-sonnet-4", "anthropic"),
        ("OpenRouter", "openai/gpt-4o", "openai"),
        ("openrouter", "meta-llama/llama-3.3-70b-instruct", "meta"),
        ("openrouter", "x-ai/grok-4", "xai"),
        ("openrouter", "openrouter/auto", "openrouter"),
        ("openrouter", "some-model-without-maker", "openrouter"),
        ("together", "meta-llama/Llama-3-70b", "together"),
    ],
)
def test_route_vendor_names_the_maker_behind_openrouter(
    vendor: str, model: str, expected: str
) -> None:
    route = Route(model, "http://127.0.0.1:9", vendor, "openai", "KEY")
    assert route_vendor(route) == expected


@pytest.mark.integration
def test_an_openrouter_reviewer_of_the_implementers_maker_is_refused(server: ModelServer) -> None:
    routes = {
        "reviewer": Route(
            "anthropic/claude-sonnet-4", server.url + "/v1", "openrouter", "openai", "K"
        )
    }
    client = ModelClient(routes, env={"K": KEY}, parking=MemoryParking())
    try:
        reviewer = ModelReviewer(client, "w1")
        assert reviewer.vendor == "anthropic"
        with pytest.raises(SameVendorRefused):
            check_vendors("anthropic", reviewer.vendor, allow_same_vendor=False)
    finally:
        client.close()


@pytest.mark.integration
def test_a_review_workspace_git_cannot_make_fails_before_any_agent_starts(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A broken global git configuration makes `git init` fail, in git's own words.
    broken = tmp_path / "gitconfig"
    broken.write_text("[core\n")
    monkeypatch.setenv("GIT_CONFIG_GLOBAL", str(broken))
    sessions = tmp_path / "sessions"
    reviewer = CliReviewer(HeadlessHost(sessions), PRESETS["codex"], {}, tmp_path / "state")
    with pytest.raises(GitError) as failed:
        reviewer.ask("the diff", "review it")
    assert isinstance(failed.value, HarnessError)  # the pipeline fails the attempt with it
    assert failed.value.message.startswith("git init -q failed in ")
    assert failed.value.message.endswith(f"bad config line 1 in file {broken}")
    assert not sessions.exists()  # no reviewer agent was started


@pytest.mark.unit
@pytest.mark.parametrize(
    "text",
    [
        '{"a": ' * 100_000 + "1" + "}" * 100_000,  # past the reader's recursion limit
        "[" * 100_000 + "]" * 100_000,
        '```json\n{"x": ' + "[" * 50_000 + "]" * 50_000 + "}\n```",
    ],
    ids=["objects", "lists", "fenced"],
)
def test_an_answer_nested_past_any_limit_is_no_verdict_not_a_crash(text: str) -> None:
    # A reviewer that answers like this costs the item nothing more than a bad answer would.
    assert parse_verdict(text) is None
    assert parse_verdict('{"approved": true} ' + text) == Verdict(True, (), False)
