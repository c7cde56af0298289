"""The plan-and-execute loop end to end: scripted models over HTTP, a real git worktree.

Every count asserted here is a count of requests the scripted server received, so "not redone"
and "not replanned" mean no model was paid for it.
"""

from __future__ import annotations

import json
import os
from typing import Any

import pytest

from agent_harness.implement.executor import Budgets, Executor
from agent_harness.implement.steps import StepPlan, StepStatus, load_plan
from agent_harness.testing.model_server import ScriptedCompletion, ScriptedFailure

from .conftest import (
    Rig,
    exists,
    matches,
    plan_answer,
    step,
    whole_file,
)

pytestmark = pytest.mark.integration

FAREWELL = "def greet():\n    return 'hi'\n\n\ndef farewell():\n    return 'bye'\n"

THREE_STEPS = plan_answer(
    step("1", "Create notes.txt describing the change", exists("notes.txt")),
    step("2", "Add farewell() to app.py", matches("app.py", r"^def farewell\(\):")),
    step(
        "3",
        "Record the change in CHANGES.md",
        {"kind": "command", "command": "grep -q farewell CHANGES.md"},
    ),
)
EDIT_1 = whole_file("notes.txt", "farewell is coming\n")
EDIT_2 = whole_file("app.py", FAREWELL)
EDIT_3 = whole_file("CHANGES.md", "- added farewell\n")


class Killed(Exception):
    """Stands in for the process dying at a chosen moment."""


def user_text(request: Any) -> str:
    return json.dumps(request.body["messages"])


def test_a_plan_runs_step_by_step_to_done(rig: Rig) -> None:
    rig.server.enqueue(THREE_STEPS, EDIT_1, EDIT_2, EDIT_3)

    result = rig.run()

    assert result.status == "done" and result.blocker is None
    assert [s.status for s in result.plan.steps] == [StepStatus.DONE] * 3
    assert (rig.worktree / "app.py").read_text() == FAREWELL
    assert (rig.worktree / "CHANGES.md").exists()
    assert (len(rig.planner_requests), len(rig.implementer_requests)) == (1, 3)
    assert result.calls == 4
    assert (result.tokens_in, result.tokens_out) == (48, 28)  # the server's 12 in / 7 out each
    assert result.cost_usd is None  # models no price list knows: unknown, never $0
    assert rig.kinds() == [
        "executor.plan",
        *["executor.step_started", "executor.step_done"] * 3,
        "executor.done",
    ]
    saved = load_plan(rig.plan_path)
    assert saved.status == "done" and [s.attempts for s in saved.steps] == [1, 1, 1]
    # Each implementer request is about its own step, with the file it must change shown.
    assert "Your step (2): Add farewell() to app.py" in user_text(rig.implementer_requests[1])
    assert "return 'hi'" in user_text(rig.implementer_requests[1])


def test_a_run_of_models_the_price_list_knows_costs_the_sum_of_its_calls(rig: Rig) -> None:
    from dataclasses import replace

    from genai_prices import Usage as LibUsage
    from genai_prices import calc_price

    known = {"anthropic": "claude-sonnet-4-5", "openai": "gpt-4.1"}
    routes = dict(rig.client.routes)
    rig.client.reload({r: replace(route, model=known[route.vendor]) for r, route in routes.items()})
    rig.server.enqueue(THREE_STEPS, EDIT_1, EDIT_2, EDIT_3)
    result = rig.run()

    def listed(vendor: str) -> float:  # one call of the server's 12 tokens in, 7 out
        usage = LibUsage(input_tokens=12, output_tokens=7)
        return float(calc_price(usage, model_ref=known[vendor], provider_id=vendor).total_price)

    # The model.call events are the audit's; this is what budgets count before the next call.
    expected = listed(routes["planner"].vendor) + 3 * listed(routes["implementer"].vendor)
    assert result.status == "done" and result.cost_usd == pytest.approx(expected)


def test_a_killed_run_resumes_without_redoing_finished_steps(rig: Rig) -> None:
    rig.server.enqueue(THREE_STEPS, EDIT_1, EDIT_2)

    def die_after_step_2(kind: str, payload: dict[str, Any]) -> None:
        rig.events.append((kind, payload))
        if kind == "executor.step_done" and payload["step"] == "2":
            raise Killed

    executor = Executor(rig.client, events=die_after_step_2, worker="w1")
    with pytest.raises(Killed):
        executor.execute(rig.item, rig.worktree, rig.plan_path)
    assert len(rig.server.requests) == 3

    on_disk = load_plan(rig.plan_path)
    assert [s.status for s in on_disk.steps] == [
        StepStatus.DONE,
        StepStatus.DONE,
        StepStatus.PENDING,
    ]

    rig.server.enqueue(EDIT_3)
    result = rig.run(resume=True)

    assert result.status == "done"
    assert len(rig.planner_requests) == 1  # no new plan
    assert len(rig.implementer_requests) == 3  # only step 3 was asked for on resume
    assert "Your step (3)" in user_text(rig.implementer_requests[-1])
    assert [s.attempts for s in result.plan.steps] == [1, 1, 1]
    assert result.calls == 4  # the count carries over runs


def test_a_call_budget_stops_the_run_and_a_resume_with_more_budget_finishes(rig: Rig) -> None:
    rig.server.enqueue(THREE_STEPS, EDIT_1, EDIT_2, EDIT_3)

    stopped = rig.run(max_model_calls=3)

    assert stopped.status == "blocked" and stopped.blocking_step == "3"
    assert "model call budget is spent (3 of 3 calls)" in (stopped.blocker or "")
    assert stopped.plan.step("3").status is StepStatus.PENDING
    assert len(rig.server.requests) == 3

    finished = rig.run(resume=True, max_model_calls=10)

    assert finished.status == "done" and finished.calls == 4
    assert len(rig.server.requests) == 4


def test_a_step_left_running_by_a_crash_is_checked_before_anyone_is_asked(rig: Rig) -> None:
    rig.server.enqueue(THREE_STEPS, EDIT_1, EDIT_2, EDIT_3)
    rig.run()
    crashed = load_plan(rig.plan_path)
    crashed.status = "running"
    crashed.step("3").status = StepStatus.RUNNING  # its edit landed, its verdict did not
    rig.plan_path.write_text(crashed.model_dump_json())

    result = rig.run(resume=True)

    assert result.status == "done"
    assert len(rig.server.requests) == 4  # nothing new
    assert "already passed its check on resume" in (result.plan.step("3").result or "")


def test_a_step_that_can_never_succeed_gets_exactly_max_replans_replans(rig: Rig) -> None:
    impossible = matches("app.py", r"def impossible\(\)")
    rig.server.enqueue(
        plan_answer(
            step("1", "Create notes.txt", exists("notes.txt")),
            step("2", "Add impossible() to app.py", impossible),
            step("3", "Record it", exists("CHANGES.md")),
        )
    )
    # Revision 0: step 1 done, step 2 fails twice (step 3 depends on it: skipped).
    rig.server.enqueue(EDIT_1, EDIT_2, EDIT_2)
    # Two replans, each one step that fails twice more.
    for _ in range(2):
        rig.server.enqueue(
            plan_answer(step("a", "Add impossible() to app.py", impossible)), EDIT_2, EDIT_2
        )

    result = rig.run(max_replans=2)

    assert result.status == "blocked"
    assert len(rig.planner_requests) == 3  # max_replans + 1
    assert result.plan.revision == 2 and len(result.plan.replans) == 2
    assert result.blocking_step == "5"  # the last plan's step, numbered after 1..3 and 4
    assert result.plan.step("5").status is StepStatus.FAILED
    assert "no replans left (2 allowed)" in (result.blocker or "")
    assert "def impossible" in (result.blocker or "")
    assert rig.kinds().count("executor.replan") == 2
    assert rig.server.remaining == 0
    # The replan hears what was done, what failed and why, and keeps the done step.
    replan_prompt = user_text(rig.planner_requests[1])
    assert "1: Create notes.txt" in replan_prompt and "does not match" in replan_prompt
    assert [s.id for s in result.plan.steps] == ["1", "5"]
    assert load_plan(rig.plan_path).status == "blocked"


def test_a_transient_failure_retries_the_step_not_the_plan(rig: Rig) -> None:
    rig.server.enqueue(
        THREE_STEPS,
        EDIT_1,
        whole_file("app.py", "def greet():\n    return 'hi'\n\n\ndef farewel():\n    pass\n"),
        EDIT_2,
        EDIT_3,
    )

    result = rig.run()

    assert result.status == "done"
    assert len(rig.planner_requests) == 1
    assert result.plan.step("2").attempts == 2
    retry_prompt = user_text(rig.implementer_requests[2])
    assert "Your previous attempt at this step failed" in retry_prompt
    assert "does not match anywhere in app.py" in retry_prompt
    assert "executor.step_retry" in rig.kinds() and "executor.replan" not in rig.kinds()


def test_an_edit_that_does_not_apply_goes_back_with_the_ladders_reason(rig: Rig) -> None:
    bad_diff = (
        "--- a/app.py\n+++ b/app.py\n@@ -1,2 +1,2 @@\n"
        "-def salute():\n-    return 'yo'\n+def salute():\n+    return 'hey'\n"
    )
    rig.server.enqueue(THREE_STEPS, EDIT_1, ScriptedCompletion(text=bad_diff), EDIT_2, EDIT_3)

    result = rig.run()

    assert result.status == "done" and len(rig.planner_requests) == 1
    assert result.plan.step("2").attempts == 2
    assert "the edit did not apply" in user_text(rig.implementer_requests[2])
    assert "app.py" in user_text(rig.implementer_requests[2])


def test_a_permanent_failure_skips_its_dependents_and_runs_the_rest(rig: Rig) -> None:
    rig.server.enqueue(
        plan_answer(
            step("1", "Run the missing tool", {"kind": "command", "command": "no-such-tool-xyz"}),
            step("2", "Use its output", exists("out.txt"), depends_on=["1"]),
            step("3", "Then build on that", exists("more.txt"), depends_on=["2"]),
            step("4", "Write notes", exists("notes.txt"), depends_on=[]),
        ),
        ScriptedCompletion(text="NO CHANGES"),
        EDIT_1,
    )

    result = rig.run(max_replans=0)

    statuses = {s.id: s.status for s in result.plan.steps}
    assert statuses == {
        "1": StepStatus.FAILED,
        "2": StepStatus.SKIPPED,
        "3": StepStatus.SKIPPED,
        "4": StepStatus.DONE,
    }
    # Exit 127 is permanent at once: one try for step 1, none for 2 and 3, one for 4.
    assert len(rig.implementer_requests) == 2
    assert result.status == "blocked" and result.blocking_step == "1"
    assert rig.kinds().count("executor.step_skipped") == 2


def test_a_partial_plan_is_returned_not_raised(rig: Rig) -> None:
    rig.server.enqueue(
        plan_answer(
            step("1", "Create notes.txt", exists("notes.txt")),
            step("2", "Add farewell", matches("app.py", "farewell")),
            step("3", "Record it", exists("CHANGES.md")),
        ),
        EDIT_1,
        whole_file("app.py", "x = 1\n"),
        whole_file("app.py", "x = 2\n"),
    )

    result = rig.run(max_replans=0)  # must not raise

    assert result.status == "blocked"
    assert [s.status for s in result.plan.steps] == [
        StepStatus.DONE,
        StepStatus.FAILED,
        StepStatus.SKIPPED,
    ]
    assert result.blocking_step == "2" and "step 2 (Add farewell) failed" in (result.blocker or "")
    assert rig.kinds()[-1] == "executor.blocked"
    on_disk = StepPlan.model_validate_json(rig.plan_path.read_text())
    assert on_disk == result.plan


def test_an_answer_without_json_is_asked_for_once_more(rig: Rig) -> None:
    rig.server.enqueue(
        ScriptedCompletion(text="Sure! First I will add the function, then test it."),
        THREE_STEPS,
        EDIT_1,
        EDIT_2,
        EDIT_3,
    )

    result = rig.run()

    assert result.status == "done" and len(rig.planner_requests) == 2
    second = rig.planner_requests[1].body["messages"]
    assert second[1]["role"] == "assistant"
    assert "holds no JSON object" in second[2]["content"]


def test_two_answers_without_a_plan_block_with_the_reason(rig: Rig) -> None:
    rig.server.enqueue(
        ScriptedCompletion(text="I would rather not plan."),
        ScriptedCompletion(text='{"thoughts": "still no"}'),
    )

    result = rig.run()

    assert result.status == "blocked" and result.blocking_step is None
    assert result.plan.steps == []
    assert "plan refused after 2 answers" in (result.blocker or "")
    assert len(rig.server.requests) == 2


def test_a_check_nobody_can_run_is_refused_at_plan_time(rig: Rig) -> None:
    vague = plan_answer(
        step("1", "Create notes.txt", exists("notes.txt")),
        step("2", "Tidy up app.py", "the code looks good"),
        step("3", "Record it", exists("CHANGES.md")),
    )
    rig.server.enqueue(vague, THREE_STEPS, EDIT_1, EDIT_2, EDIT_3)

    result = rig.run()

    assert result.status == "done" and len(rig.planner_requests) == 2
    feedback = rig.planner_requests[1].body["messages"][2]["content"]
    assert "step 2 has the check 'the code looks good', which is prose" in feedback
    assert [s.success_check.kind for s in result.plan.steps] == ["file_exists", "regex", "command"]


def test_a_plan_refused_twice_is_a_clear_blocker(rig: Rig) -> None:
    vague = plan_answer(
        step("1", "Think about it", "looks good"),
        step("2", "Consider options", None),
        step("3", "Write it", exists("../outside.txt")),
    )
    rig.server.enqueue(vague, vague)

    result = rig.run()

    assert result.status == "blocked" and len(rig.server.requests) == 2
    blocker = result.blocker or ""
    assert "step 2 has no success check" in blocker
    assert "outside the repository" in blocker
    assert not (rig.worktree / "notes.txt").exists()


def test_a_spent_cap_parks_the_run_with_its_step_kept_for_a_resume(rig: Rig) -> None:
    from agent_harness.models.parking import EndpointParked

    rig.server.enqueue(THREE_STEPS, EDIT_1, ScriptedFailure.openai_insufficient_quota())

    with pytest.raises(EndpointParked, match="cap from openai"):
        rig.run()

    assert len(rig.implementer_requests) == 2 and len(rig.planner_requests) == 1
    saved = load_plan(rig.plan_path)
    assert saved.step("1").status is StepStatus.DONE
    assert saved.step("2").status is StepStatus.RUNNING  # a resume checks it first
    assert rig.server.remaining == 0


def test_an_auth_failure_stops_at_once(rig: Rig) -> None:
    failure = ScriptedFailure.openai(
        401, "Incorrect API key", "invalid_request_error", "invalid_api_key"
    )
    rig.server.enqueue(THREE_STEPS, EDIT_1, failure)

    result = rig.run()

    assert result.status == "blocked" and result.blocking_step == "2"
    assert "auth" in (result.blocker or "")
    assert len(rig.implementer_requests) == 2  # one for step 1, one (never retried) for step 2
    assert len(rig.planner_requests) == 1  # never replanned
    assert result.plan.step("2").status is StepStatus.PENDING  # a resume may try it again
    assert rig.server.remaining == 0


def test_a_refusal_is_permanent_and_buys_a_replan_not_a_retry(rig: Rig) -> None:
    rig.server.enqueue(
        THREE_STEPS,
        EDIT_1,
        ScriptedCompletion(text="I can't help with that", stop_reason="content_filter"),
        plan_answer(
            step("4", "Add farewell() another way", matches("app.py", "farewell")),
            step("5", "Record it", exists("CHANGES.md")),
        ),
        EDIT_2,
        EDIT_3,
    )

    result = rig.run()

    assert result.status == "done"
    assert len(rig.planner_requests) == 2 and result.plan.revision == 1
    assert result.plan.replans[0].failed_step == "2"
    assert "refusal" in result.plan.replans[0].reason
    assert [s.id for s in result.plan.steps] == ["1", "4", "5"]


def test_a_server_that_keeps_failing_retries_the_step_then_blocks(rig: Rig) -> None:
    # The client retries once itself (RetryPolicy.max_attempts=2), so each step try is two
    # requests; two tries of the step are four, and then the run stops rather than replans.
    rig.server.enqueue(THREE_STEPS, *[ScriptedFailure.openai_server_error()] * 4)

    result = rig.run()

    assert result.status == "blocked" and result.blocking_step == "1"
    assert "the model kept failing" in (result.blocker or "")
    assert len(rig.implementer_requests) == 4 and len(rig.planner_requests) == 1
    assert result.plan.step("1").status is StepStatus.PENDING


def test_a_server_hiccup_is_retried_within_the_step(rig: Rig) -> None:
    rig.server.enqueue(
        THREE_STEPS, *[ScriptedFailure.openai_server_error()] * 2, EDIT_1, EDIT_2, EDIT_3
    )

    result = rig.run()

    assert result.status == "done" and len(rig.planner_requests) == 1
    assert result.plan.step("1").attempts == 2


def test_a_changed_item_is_planned_afresh_on_resume(rig: Rig) -> None:
    rig.server.enqueue(THREE_STEPS, EDIT_1, EDIT_2, EDIT_3)
    rig.run()
    rig.item = rig.item.model_copy(update={"body": "Now say goodbye instead."})
    rig.server.enqueue(THREE_STEPS, EDIT_1, EDIT_2, EDIT_3)

    result = rig.run(resume=True)

    assert result.status == "done" and len(rig.planner_requests) == 2
    assert "executor.plan_discarded" in rig.kinds()


def test_checks_never_see_the_model_api_keys(rig: Rig) -> None:
    leaky = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "ANTH_KEY": "k1", "OAI_KEY": "k2"}
    no_keys = {"kind": "command", "command": 'test -z "$ANTH_KEY$OAI_KEY" && test -f notes.txt'}
    rig.server.enqueue(
        plan_answer(
            step("1", "Create notes.txt", no_keys),
            step("2", "Add farewell", matches("app.py", "farewell")),
            step("3", "Record it", exists("CHANGES.md")),
        ),
        EDIT_1,
        EDIT_2,
        EDIT_3,
    )

    result = Executor(rig.client, check_env=leaky).execute(rig.item, rig.worktree, rig.plan_path)

    assert result.status == "done" and result.plan.step("1").attempts == 1


BROKEN_GITDIR = "gitdir: /nonexistent/agent-harness/worktree\n"


def test_a_worktree_git_cannot_list_blocks_the_run_before_any_model_call(rig: Rig) -> None:
    # The worktree's link to its repository points nowhere: every git command in it fails.
    (rig.worktree / ".git").write_text(BROKEN_GITDIR)
    rig.server.enqueue(THREE_STEPS)

    result = rig.run()

    assert result.status == "blocked" and result.blocking_step is None
    assert (result.blocker or "").startswith("cannot list the worktree's files: git ls-files")
    assert "not a git repository" in (result.blocker or "")
    assert rig.server.requests == [] and result.calls == 0
    assert rig.kinds() == ["executor.blocked"]


def test_a_worktree_that_breaks_mid_step_blocks_with_the_step_left_for_a_resume(
    rig: Rig,
) -> None:
    rig.server.enqueue(THREE_STEPS, EDIT_1)

    def break_git_when_step_1_starts(kind: str, payload: dict[str, Any]) -> None:
        rig.events.append((kind, payload))
        if kind == "executor.step_started" and payload["step"] == "1":
            (rig.worktree / ".git").write_text(BROKEN_GITDIR)

    executor = Executor(rig.client, events=break_git_when_step_1_starts, worker="w1")
    result = executor.execute(rig.item, rig.worktree, rig.plan_path)

    assert result.status == "blocked" and result.blocking_step == "1"
    assert (result.blocker or "").startswith("cannot list the worktree's files: git ls-files")
    assert len(rig.implementer_requests) == 0  # nobody was asked to edit blind
    assert load_plan(rig.plan_path).step("1").status is StepStatus.PENDING


# -- feedback from the checks and the reviewer --------------------------------------------------


def test_finished_work_sent_back_is_revised_with_the_feedback_not_resumed(rig: Rig) -> None:
    rig.server.enqueue(THREE_STEPS, EDIT_1, EDIT_2, EDIT_3)
    assert rig.run().status == "done"
    no = "the reviewer said no: farewell() must say 'goodbye', not 'bye'"
    fix = plan_answer(step("4", "Make farewell() say goodbye", matches("app.py", "goodbye")))
    rig.server.enqueue(fix, whole_file("app.py", FAREWELL.replace("bye", "goodbye")))

    result = rig.executor().execute(rig.item, rig.worktree, rig.plan_path, resume=True, feedback=no)

    assert result.status == "done"
    assert len(rig.planner_requests) == 2 and len(rig.implementer_requests) == 4
    revision = user_text(rig.planner_requests[1])
    assert "The finished work was sent back" in revision and "must say 'goodbye'" in revision
    assert "3: Record the change in CHANGES.md" in revision  # what was done is kept
    assert "goodbye" in (rig.worktree / "app.py").read_text()
    assert [s.id for s in result.plan.steps] == ["1", "2", "3", "4"]
    assert result.plan.revision == 1 and result.plan.replans[-1].failed_step == "sent back"


def test_a_blocked_plan_with_its_replans_spent_is_blocked_for_good(rig: Rig) -> None:
    impossible = matches("app.py", r"def impossible\(\)")
    rig.server.enqueue(
        plan_answer(step("1", "Add impossible() to app.py", impossible)), EDIT_2, EDIT_2
    )
    first = rig.run(max_replans=0, min_steps=1)
    assert first.status == "blocked" and first.permanent, first.blocker
    asked = len(rig.server.requests)
    # Another attempt can only find the same: it says so again, and pays for nothing.
    again = rig.run(resume=True, max_replans=0, min_steps=1)
    assert again.status == "blocked" and again.permanent
    assert len(rig.server.requests) == asked
    sent_back = rig.executor(max_replans=0, min_steps=1).execute(
        rig.item, rig.worktree, rig.plan_path, resume=True, feedback="checks failed"
    )
    assert sent_back.permanent and len(rig.server.requests) == asked


def test_a_command_the_model_wrote_finds_no_login_while_the_items_own_checks_keep_theirs(
    rig: Rig, tmp_path: Any
) -> None:
    # A git credential helper and gh's login are how a command could push past review: the
    # model's own command runs in a home of its own and git finds no credential, wherever the
    # helper was set (~/.gitconfig, $XDG_CONFIG_HOME/git/config, git settings in the
    # environment); the person's checks keep theirs, and a toolchain in the home is found.
    home = tmp_path / "user-home"
    (home / ".config" / "gh").mkdir(parents=True)
    (home / ".config" / "gh" / "hosts.yml").write_text("github.com:\n  oauth_token: x\n")
    (home / ".gitconfig").write_text("[credential]\n\thelper = store\n")
    (home / ".git-credentials").write_text("https://me:tok123@github.com\n")
    (home / ".rustup").mkdir()
    elsewhere = tmp_path / "creds"
    elsewhere.write_text("https://me:tok456@example.com\n")
    (home / ".config" / "git").mkdir()
    helper = f"store --file={elsewhere}"
    (home / ".config" / "git" / "config").write_text(f"[credential]\n\thelper = {helper}\n")
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(home)}
    env |= {"XDG_CONFIG_HOME": str(home / ".config"), "GIT_CONFIG_COUNT": "1"}
    env |= {"GIT_CONFIG_KEY_0": "credential.helper", "GIT_CONFIG_VALUE_0": helper}
    env["SSH_AUTH_SOCK"] = str(tmp_path / "agent.sock")
    ask = "printf 'protocol=https\\nhost=github.com\\n\\n' | git credential fill"
    other = "printf 'protocol=https\\nhost=example.com\\n\\n' | git credential fill"
    no_login = (
        f'! ({ask}) && ! ({other}) && test ! -e "$HOME/.config/gh/hosts.yml" '
        f'&& test ! -e "$XDG_CONFIG_HOME/gh/hosts.yml" && test -z "$SSH_AUTH_SOCK" '
        f'&& test "$RUSTUP_HOME" = {home}/.rustup'
    )
    rig.server.enqueue(
        plan_answer(
            step("1", "Create notes.txt", {"kind": "command", "command": no_login}),
            step("2", "Run the item's checks", {"kind": "item_checks"}),
        ),
        EDIT_1,
        EDIT_2,
    )
    own = f"{ask} | grep -q password=tok123 && {other} | grep -q password=tok456"
    executor = Executor(rig.client, check_env=env, item_checks=[own], budgets=Budgets(min_steps=1))
    result = executor.execute(rig.item, rig.worktree, rig.plan_path)
    assert result.status == "done", result.blocker
    assert [s.attempts for s in result.plan.steps] == [1, 1]


CANARY = "ghp_" + "C4nary0123456789abcdefghijklmnopqrstu"


def test_a_credential_a_check_prints_is_kept_nowhere_and_sent_to_no_model(rig: Rig) -> None:
    # A check that read a token (from a parent's environment, a file) prints it and fails: the
    # plan file, the events and the next prompt hold a mask in its place.
    # The command spells the token in two halves, as a script reading it from elsewhere would.
    halves = f"printf 'found GH_TOKEN=%s%s\\n' {CANARY[:10]} {CANARY[10:]}; exit 1"
    leak = {"kind": "command", "command": halves}
    rig.server.enqueue(plan_answer(step("1", "Create notes.txt", leak)), EDIT_1, EDIT_1, EDIT_1)
    result = rig.run(max_replans=0, min_steps=1)
    assert result.status == "blocked"
    assert CANARY not in rig.plan_path.read_text()
    assert CANARY not in json.dumps(rig.events) and CANARY not in (result.blocker or "")
    assert len(rig.implementer_requests) >= 2
    assert all(CANARY not in user_text(r) for r in rig.server.requests)
    assert "[redacted" in user_text(rig.implementer_requests[-1])


def test_a_run_killed_during_a_model_call_still_counts_the_call(rig: Rig) -> None:
    # The budget is over every run of the plan: a call paid for and then lost to a kill is a
    # call all the same, or each crash would buy one more.
    rig.server.enqueue(THREE_STEPS)

    class DiesDuringTheCall:
        def complete(self, *args: Any, **kwargs: Any) -> Any:
            rig.client.complete(*args, **kwargs)
            raise Killed

    with pytest.raises(Killed):
        Executor(DiesDuringTheCall()).execute(rig.item, rig.worktree, rig.plan_path)
    assert len(rig.server.requests) == 1
    assert load_plan(rig.plan_path).calls == 1


def test_a_budget_spent_while_replanning_blocks_for_good(rig: Rig) -> None:
    impossible = matches("app.py", r"def impossible\(\)")
    rig.server.enqueue(plan_answer(step("1", "Add impossible() to app.py", impossible)), EDIT_2)
    # One call plans, one edits; the replan the failed step asks for finds the budget spent.
    result = rig.run(max_model_calls=2, max_replans=3, max_attempts=1, min_steps=1)
    assert result.status == "blocked" and result.permanent, result.blocker
    assert "model call budget is spent" in (result.blocker or "")
    assert result.blocking_step == "1"


def test_no_call_is_made_that_could_take_the_run_past_its_allowance(rig: Rig) -> None:
    from dataclasses import replace

    known = {"anthropic": "claude-sonnet-4-5", "openai": "gpt-4.1"}
    routes = dict(rig.client.routes)
    rig.client.reload({r: replace(route, model=known[route.vendor]) for r, route in routes.items()})
    rig.server.enqueue(THREE_STEPS, EDIT_1, EDIT_2, EDIT_3)
    # 4,096 tokens out at the price list's rate is more than a cent: the planner is never asked.
    stopped = rig.executor().execute(rig.item, rig.worktree, rig.plan_path, allowance_usd=0.01)
    assert stopped.status == "blocked" and stopped.over_budget and not stopped.permanent
    assert stopped.blocker is not None and "the next planner call may cost up to $0.0" in (
        stopped.blocker
    )
    assert rig.server.requests == [] and stopped.cost_usd == 0.0
    # Room for every call's worst case: the plan runs to its end, for what its calls cost.
    done = rig.executor().execute(rig.item, rig.worktree, rig.plan_path, allowance_usd=1.0)
    assert done.status == "done" and not done.over_budget
    assert done.cost_usd is not None and 0 < done.cost_usd < 0.01


def test_a_model_of_unknown_price_makes_no_call_under_an_allowance(rig: Rig) -> None:
    rig.server.enqueue(THREE_STEPS, EDIT_1, EDIT_2, EDIT_3)
    # The scripted server's models are on no price list: a budget could not be kept.
    result = rig.executor().execute(rig.item, rig.worktree, rig.plan_path, allowance_usd=5.0)
    assert result.status == "blocked" and result.permanent and not result.over_budget
    assert result.blocker is not None and "price is not known" in result.blocker
    assert rig.server.requests == []


def _known_models_and_an_answer_without_usage(rig: Rig) -> None:
    from dataclasses import replace

    known = {"anthropic": "claude-sonnet-4-5", "openai": "gpt-4.1"}
    routes = dict(rig.client.routes)
    rig.client.reload({r: replace(route, model=known[route.vendor]) for r, route in routes.items()})
    unsaid = replace(EDIT_1, input_tokens=None, output_tokens=None)
    rig.server.enqueue(THREE_STEPS, unsaid, EDIT_2, EDIT_3)


def test_a_call_that_reported_no_usage_counts_at_its_worst_case_not_as_a_stop(rig: Rig) -> None:
    # An answer with no usage made the run's spend unknown, and the item failed for good.
    _known_models_and_an_answer_without_usage(rig)
    done = rig.executor().execute(rig.item, rig.worktree, rig.plan_path, allowance_usd=1.0)
    assert done.status == "done" and done.cost_usd is None  # unknown, as it was


def test_a_call_that_reported_no_usage_leaves_its_worst_case_spent(rig: Rig) -> None:
    # The planner's worst case is $0.065, each edit's $0.034 (4,096 tokens out at $8 a million
    # and what is sent): the planner's and the first edit's fit $0.066, and the first edit,
    # reporting nothing, counts as its $0.034, so the second's would pass it (as $0 it fit).
    _known_models_and_an_answer_without_usage(rig)
    stopped = rig.executor().execute(rig.item, rig.worktree, rig.plan_path, allowance_usd=0.066)
    assert stopped.status == "blocked" and stopped.over_budget and not stopped.permanent
    assert len(rig.server.requests) == 2
