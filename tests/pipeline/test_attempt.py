"""One attempt, stage by stage, over fakes: each way it can end, and what it skips on resume."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from agent_harness.implement.protocol import ImplementResult
from agent_harness.models.parking import EndpointParked
from agent_harness.pipeline.attempt import Attempt
from agent_harness.pipeline.checks import CheckRun
from agent_harness.plan.markdown import parse_plan
from agent_harness.queue import leases, retries
from agent_harness.queue.views import errors_view
from agent_harness.store.events import ChecksPassed, PullOpened, Reviewed
from agent_harness.testing.scripted import (
    ScriptedChecks,
    ScriptedImplementer,
    ScriptedReviewer,
    Step,
    failed,
    passed,
    verdict,
)

from .conftest import PLAN, Rig

pytestmark = pytest.mark.unit


def attempt(rig: Rig) -> Attempt:
    plan, lease = rig.claim()
    return Attempt(rig.parts(), plan.item("T1"), lease)


def test_a_good_change_goes_from_agent_to_pull_request(rig: Rig) -> None:
    attempt(rig).run()
    assert rig.state().state == "pr_open"
    assert rig.kinds() == [
        "enqueued", "claimed", "worktree", "agent_started", "agent_finished",
        "advanced", "check", "check", "checks_passed", "advanced", "review", "pushed",
        "pr_opened", "completed",
    ]  # fmt: skip
    assert rig.checks.runs == [["pytest -q", "python -m unittest"]]  # the item's own check too
    [pull] = rig.tracker.pulls.values()
    assert pull.head_ref == "agent-harness/T1-count-words" and pull.base_ref == "main"
    assert "approved by other" in pull.body and "| `pytest -q` | passed |" in pull.body
    assert rig.workspace is not None and rig.workspace.pushed == {
        pull.head_ref: pull.head_sha or rig.workspace.pushed[pull.head_ref]
    }
    assert [kind for kind, _item, _payload in rig.heard][:1] == ["attempt"]


def test_a_failing_check_goes_back_with_its_output_and_no_review(rig: Rig) -> None:
    rig.checks.outcomes["pytest -q"] = [failed("pytest -q", "E   assert 1 == 2")]
    attempt(rig).run()
    record = rig.state()
    assert (record.state, record.attempts) == ("pending", 1)
    assert record.reason == "check `pytest -q` failed (exit 1)"
    assert rig.reviewer.prompts == []
    feedback = rig.store.all_events(project="octo/app:PLAN", item="T1")[-3].payload
    assert feedback.as_dict()["detail"] == "E   assert 1 == 2"
    [failed_attempt] = [
        e.payload
        for e in rig.store.all_events(project="octo/app:PLAN", item="T1")
        if e.kind == "attempt_failed"
    ]
    assert failed_attempt.as_dict()["failure"] == "check_failed"  # what decided the retry


@pytest.mark.parametrize(("permanent", "state"), [(False, "pending"), (True, "failed")])
def test_a_reviewer_s_no_is_feedback_and_permanent_means_failed(
    rig: Rig, permanent: bool, state: str
) -> None:
    rig.reviewer = ScriptedReviewer([verdict(False, "words.py has no tests", permanent=permanent)])
    attempt(rig).run()
    assert rig.state().state == state
    assert rig.state().reason == "review: words.py has no tests"
    assert rig.tracker.pulls == {}


def test_an_agent_that_changes_nothing_fails_the_attempt(rig: Rig) -> None:
    rig.implementer = ScriptedImplementer([Step()])
    attempt(rig).run()
    assert rig.state().state == "pending"
    assert rig.state().reason == "the agent finished but changed nothing (exited 0)"
    assert rig.checks.runs == []
    assert errors_view(rig.store).attempts_by_class[0].failure == "no_change"


def test_a_spent_window_waits_with_the_attempt_refunded(rig: Rig) -> None:
    limited = ImplementResult(
        ok=False, state="rate_limited", reason="usage limit", wait_until=rig.clock() + 3600
    )
    rig.implementer = ScriptedImplementer([Step(result=limited)])
    attempt(rig).run()
    record = rig.state()
    assert (record.state, record.attempts, record.not_before) == (
        "waiting",
        0,
        rig.clock() + 3600,
    )
    assert rig.store.parked("agent:scripted") is not None


def test_a_protected_path_stops_the_attempt_before_any_check(rig: Rig) -> None:
    rig.implementer = ScriptedImplementer([Step(files={".github/workflows/ci.yml": "on: push\n"})])
    attempt(rig).run()
    assert rig.state().state == "pending"
    assert "touches protected path .github/workflows/ci.yml" in (rig.state().reason or "")
    assert rig.checks.runs == [] and rig.reviewer.prompts == []


def test_after_a_protected_path_the_next_attempt_is_told_why_on_a_branch_without_it(
    rig: Rig,
) -> None:
    rig.implementer = ScriptedImplementer(
        [
            Step(files={"words.py": "N = 1\n", ".github/workflows/ci.yml": "on: push\n"}),
            Step(files={"words.py": "N = 2\n"}),
        ]
    )
    attempt(rig).run()
    lease = leases.claim_next(rig.store, "octo/app:PLAN", "w1", 60.0)
    assert lease is not None and lease.attempt == 2
    Attempt(rig.parts(), parse_plan(PLAN).item("T1"), lease).run()
    second = rig.implementer.calls[1]["prompt"]
    assert "The previous attempt ended with: the change touched paths it may not" in second
    assert "touches protected path .github/workflows/ci.yml" in second
    assert rig.state().state == "pr_open"
    [pull] = rig.tracker.pulls.values()
    assert pull.head_ref == "agent-harness/T1.r1-count-words"
    assert rig.workspace is not None
    tree = rig.tmp / "repo" / "worktrees" / "T1.r1"
    assert not (tree / ".github").exists() and (tree / "words.py").read_text() == "N = 2\n"


def test_a_protected_path_on_the_last_attempt_fails_the_item_and_a_retry_starts_clean(
    rig: Rig,
) -> None:
    rig.settings.max_attempts = 1
    rig.implementer = ScriptedImplementer(
        [
            Step(files={"words.py": "N = 1\n", ".github/workflows/ci.yml": "on: push\n"}),
            Step(files={"words.py": "N = 2\n"}),
        ]
    )
    attempt(rig).run()
    assert rig.state().state == "failed"
    retries.retry(rig.store, "octo/app:PLAN", "T1")  # what `work retry T1` does
    lease = leases.claim_next(rig.store, "octo/app:PLAN", "w1", 60.0)
    assert lease is not None
    Attempt(rig.parts(), parse_plan(PLAN).item("T1"), lease).run()
    assert "touches protected path .github/workflows/ci.yml" in rig.implementer.calls[1]["prompt"]
    assert rig.state().state == "pr_open"
    [pull] = rig.tracker.pulls.values()
    assert pull.head_ref != "agent-harness/T1-count-words"
    tree = rig.tmp / "repo" / "worktrees" / pull.head_ref.split("/")[1].split("-")[0]
    assert not (tree / ".github").exists()


def test_a_secret_in_the_change_stops_it_before_the_reviewer_sees_it(rig: Rig) -> None:
    rig.env["ANTHROPIC_API_KEY"] = "sk-ant-api03-" + "z" * 40
    rig.implementer = ScriptedImplementer(
        [Step(files={"conf.py": f"KEY = '{rig.env['ANTHROPIC_API_KEY']}'\n"})]
    )
    attempt(rig).run()
    assert rig.state().state == "failed"
    assert "conf.py:1 holds the value of ANTHROPIC_API_KEY" in (rig.state().reason or "")
    assert rig.reviewer.prompts == [] and rig.workspace is not None and rig.workspace.pushed == {}


def test_an_item_over_its_budget_fails_before_its_change_is_used(rig: Rig) -> None:
    rig.settings.item_cost_usd = 1.0
    costly = ImplementResult(ok=True, state="done", reason="exited 0", cost_usd=1.5)
    rig.implementer = ScriptedImplementer([Step(files={"x.py": "x\n"}, result=costly)])
    attempt(rig).run()
    assert rig.state().state == "failed"
    assert rig.state().reason == ("item cost budget spent: $1.50 of $1.00 (budgets.item_cost_usd)")


def test_a_parked_reviewer_keeps_the_checked_commit_and_refunds_the_attempt(rig: Rig) -> None:
    until = rig.clock() + 600
    rig.reviewer = ScriptedReviewer([EndpointParked("https://api", until, "window spent")])
    attempt(rig).run()
    record = rig.state()
    assert (record.state, record.attempts, record.not_before) == ("waiting", 0, until)
    # The next attempt goes straight to review: the agent is not paid again.
    rig.clock.advance(601)
    rig.reviewer = ScriptedReviewer([verdict(True)])
    rig.implementer.calls.clear()
    lease = leases.claim_next(rig.store, "octo/app:PLAN", "w2", 60.0)
    assert lease is not None
    Attempt(rig.parts(), parse_plan(PLAN).item("T1"), lease).run()
    assert rig.implementer.calls == []
    assert rig.state().state == "pr_open"
    assert "resumed" in rig.kinds()


def test_an_approved_commit_is_delivered_again_without_agent_or_review(rig: Rig) -> None:
    plan, lease = rig.claim()
    parts = rig.parts()
    assert rig.workspace is not None
    tree = rig.workspace.prepare("T1", "Count words")
    (tree.path / "words.py").write_text("N = 1\n")
    sha = rig.workspace.commit_all(tree, "T1")
    assert sha is not None
    parts.emit("T1", ChecksPassed(sha=sha))
    parts.emit("T1", Reviewed(approved=True, sha=sha, vendor="other"))
    rig.reviewer = ScriptedReviewer([])
    Attempt(rig.parts(), plan.item("T1"), lease).run()
    assert rig.implementer.calls == [] and rig.checks.runs == []
    assert rig.state().state == "pr_open"
    events = rig.store.all_events(project="octo/app:PLAN", item="T1")
    assert isinstance(events[-2].payload, PullOpened)
    assert "resumed" in rig.kinds()


def test_a_resumed_delivery_scans_the_approved_commit_before_the_push(rig: Rig) -> None:
    # The gates ran in an earlier attempt (or never, for this commit): delivery scans again.
    rig.env["ANTHROPIC_API_KEY"] = "sk-ant-api03-" + "z" * 40
    plan, lease = rig.claim()
    parts = rig.parts()
    assert rig.workspace is not None
    tree = rig.workspace.prepare("T1", "Count words")
    (tree.path / "conf.py").write_text(f"KEY = '{rig.env['ANTHROPIC_API_KEY']}'\n")
    sha = rig.workspace.commit_all(tree, "T1")
    assert sha is not None
    parts.emit("T1", Reviewed(approved=True, sha=sha, vendor="other"))
    Attempt(rig.parts(), plan.item("T1"), lease).run()
    assert rig.state().state == "failed"
    assert "conf.py:1 holds the value of ANTHROPIC_API_KEY" in (rig.state().reason or "")
    assert rig.workspace.pushed == {}


def test_an_open_pull_request_of_the_branch_is_updated_not_opened_twice(rig: Rig) -> None:
    first = rig.tracker.create_pull("old title", "old", "agent-harness/T1-count-words", "main")
    attempt(rig).run()
    assert list(rig.tracker.pulls) == [first.number]
    assert rig.tracker.pulls[first.number].title == "T1: Count words"
    opened = rig.store.all_events(project="octo/app:PLAN", item="T1")[-2].payload
    assert isinstance(opened, PullOpened) and opened.reused


def test_tracker_trouble_at_delivery_parks_and_delivers_later_without_new_work(rig: Rig) -> None:
    from agent_harness.tracker.protocol import TrackerError

    outage = TrackerError("POST /repos/octo/app/pulls failed 5 times; last: HTTP 502")
    rig.tracker.fail_next("create_pull", outage, outage)
    attempt(rig).run()
    record = rig.state()
    assert (record.state, record.attempts) == ("waiting", 0)  # parked, the attempt refunded
    assert record.reason is not None and record.reason.startswith("delivery waits for the tracker")
    first_wait = record.not_before - rig.clock()  # type: ignore[operator]
    for _ in range(2):
        rig.clock.advance(3600)
        lease = leases.claim_next(rig.store, "octo/app:PLAN", "w2", 60.0)
        assert lease is not None
        Attempt(rig.parts(), parse_plan(PLAN).item("T1"), lease).run()
    assert rig.state().state == "pr_open"
    assert len(rig.implementer.calls) == 1 and len(rig.reviewer.prompts) == 1
    assert first_wait == 60.0


def test_a_refusal_at_delivery_that_will_not_change_fails_the_item_at_once(rig: Rig) -> None:
    from agent_harness.tracker.protocol import ValidationFailed

    refusal = ValidationFailed(
        "GitHub refused POST /pulls: refusing to merge unrelated histories", None, "custom"
    )
    rig.tracker.fail_next("create_pull", refusal)
    attempt(rig).run()
    record = rig.state()
    assert (record.state, record.attempts) == ("failed", 1)
    assert (
        record.reason
        == "delivery: GitHub refused POST /pulls: refusing to merge unrelated histories"
    )


def _next_attempt(rig: Rig) -> None:
    lease = leases.claim_next(rig.store, "octo/app:PLAN", "w2", 60.0)
    assert lease is not None
    Attempt(rig.parts(), parse_plan(PLAN).item("T1"), lease).run()


def test_the_reviewers_no_reaches_the_implementers_next_attempt(rig: Rig) -> None:
    rig.reviewer = ScriptedReviewer([verdict(False, "count hyphenated words once"), verdict(True)])
    rig.implementer = ScriptedImplementer(
        [Step(files={"words.py": "N = 1\n"}), Step(files={"words.py": "N = 2\n"})]
    )
    attempt(rig).run()
    _next_attempt(rig)
    assert rig.implementer.calls[0]["feedback"] is None
    assert rig.implementer.calls[1]["feedback"] == (
        "the reviewer said no: count hyphenated words once"
    )
    assert rig.state().state == "pr_open"


def test_a_commit_the_reviewer_refused_is_never_sent_to_review_again(rig: Rig) -> None:
    # The second attempt leaves the worktree exactly as the refused commit had it.
    rig.reviewer = ScriptedReviewer([verdict(False, "count hyphenated words once")])
    rig.implementer = ScriptedImplementer([Step(files={"words.py": "N = 1\n"})])
    attempt(rig).run()
    _next_attempt(rig)
    assert len(rig.reviewer.prompts) == 1 and len(rig.checks.runs) == 1
    record = rig.state()
    assert (record.state, record.attempts) == ("pending", 2)
    assert record.reason == ("the agent left the commit the reviewer refused unchanged (exited 0)")


def test_an_implementer_blocked_for_good_ends_the_item(rig: Rig) -> None:
    blocked = ImplementResult(
        ok=False, state="blocked", reason="no replans left (2 allowed)", permanent=True
    )
    rig.implementer = ScriptedImplementer([Step(result=blocked)])
    attempt(rig).run()
    assert rig.state().state == "failed"


class CliLikeReviewer(ScriptedReviewer):
    """A reviewer whose account the run parks itself (a CLI reviewer's `agent:NAME`)."""

    parking_key = "agent:codex"


def test_a_reviewers_spent_cap_is_met_once_and_every_item_waits(rig: Rig) -> None:
    from agent_harness.models.parking import UNTIL_CLEARED

    plan = PLAN + "\n### T2: Count lines\nMake it.\n"
    cap = EndpointParked("agent:codex", UNTIL_CLEARED, "cap from codex: quota exceeded")
    rig.reviewer = CliLikeReviewer([cap])
    parsed, lease = rig.claim(plan)
    Attempt(rig.parts(), parsed.item("T1"), lease).run()
    second = leases.claim_next(rig.store, "octo/app:PLAN", "w2", 60.0)
    assert second is not None and second.item_id == "T2"
    Attempt(rig.parts(), parsed.item("T2"), second).run()
    assert len(rig.reviewer.prompts) == 1  # T2 never asked the capped reviewer
    for item in ("T1", "T2"):
        record = rig.state(item)
        assert (record.state, record.attempts, record.not_before) == ("waiting", 0, UNTIL_CLEARED)
    assert rig.store.parked("agent:codex") is not None


def test_a_credential_in_a_checks_output_is_kept_masked(rig: Rig) -> None:
    key = "sk-proj-canaryAAAAbbbbCCCCdddd0123456789"
    said = f"E   401: Incorrect API key provided: {key} at postgresql://u:canary-PW@h/x"
    rig.checks.outcomes["pytest -q"] = [failed("pytest -q", said)]
    attempt(rig).run()
    kept = json.dumps([e.payload.as_dict() for e in rig.store.all_events(project="octo/app:PLAN")])
    assert "canary" not in kept
    assert "[redacted: an OpenAI key] at postgresql://u:***@h/x" in kept


class _Host:
    """A session host on which one session, of an earlier harness's naming, is alive."""

    kind = "headless"

    def __init__(self, alive: str) -> None:
        self.alive = alive

    def exists(self, name: str) -> bool:
        return name == self.alive

    def status(self, name: str) -> object:
        from agent_harness.sessions.protocol import SessionStatus

        return SessionStatus(name == self.alive, None)


def test_an_agent_started_under_an_earlier_name_is_adopted_with_its_folder(rig: Rig) -> None:
    # A harness before this one named a session and folder otherwise: after the upgrade, the
    # item's live agent is found under its old name and its saved steps in its old folder,
    # not started a second time beside it with an empty step plan.
    from agent_harness.store.events import AgentStarted

    plan, lease = rig.claim()
    old_dir = rig.tmp / "state" / "items" / "T1-legacy"
    (old_dir / "logs").mkdir(parents=True)
    rig.store.append_event(
        "octo/app:PLAN",
        "T1",
        AgentStarted(
            implementer="x",
            session="ah-legacy-T1",
            attempt=1,
            log=str(old_dir / "logs" / "ah-legacy-T1.log"),
        ),
    )
    rig.implementer.host = _Host("ah-legacy-T1")  # type: ignore[attr-defined]
    Attempt(rig.parts(), plan.item("T1"), lease).run()
    assert [call["session"] for call in rig.implementer.calls] == ["ah-legacy-T1"]
    started = [
        e.payload for e in rig.store.all_events(project="octo/app:PLAN", item="T1")
        if isinstance(e.payload, AgentStarted)
    ]  # fmt: skip
    assert started[-1].log == str(old_dir / "logs" / "ah-legacy-T1.log")


def test_an_agent_whose_session_was_lost_is_recorded_lost_and_a_new_one_started(rig: Rig) -> None:
    # A run was killed while its agent worked, and the session went too (a reboot, the tmux
    # server killed): the rerun said "that session is picked up", started a second agent
    # with no `agent_started`, and the first agent's cost was never counted, not even unknown.
    from agent_harness.store.events import AgentFinished, AgentStarted

    plan, lease = rig.claim()
    parts = rig.parts()
    session = parts.session_name("T1")
    started = AgentStarted(implementer=rig.implementer.name, session=session, attempt=1)
    rig.store.append_event("octo/app:PLAN", "T1", started)
    rig.implementer.host = _Host("no session at all")  # type: ignore[attr-defined]
    Attempt(parts, plan.item("T1"), lease).run()
    kinds = rig.kinds()
    assert kinds[kinds.index("worktree") :][:4] == [
        "worktree", "agent_finished", "agent_started", "agent_finished",
    ]  # fmt: skip
    assert "resumed" not in kinds
    lost = next(e.payload for e in rig.store.all_events(item="T1") if e.kind == "agent_finished")
    assert isinstance(lost, AgentFinished)
    assert (lost.ok, lost.state, lost.cost_usd, lost.usage_from) == (False, "lost", None, "agent")
    assert len(rig.implementer.calls) == 1 and rig.state().state == "pr_open"


class _WritingChecks(ScriptedChecks):
    """Checks that leave a report in the worktree, as `pytest --junitxml=report.xml` does,
    and fail the first time; with `dies`, the run dies while they run (a SIGKILL)."""

    def __init__(self, dies: bool = False) -> None:
        super().__init__({} if dies else {"pytest -q": [failed("pytest -q"), passed("pytest -q")]})
        self.dies = dies

    def __call__(self, commands: Sequence[str], cwd: Path, **kwargs: Any) -> CheckRun:
        (cwd / "report.xml").write_text("<testsuite/>\n")
        (cwd / "words.py").write_text("N = 'rewritten by a formatter'\n")
        if self.dies:
            self.dies = False
            raise _Killed
        return super().__call__(commands, cwd, **kwargs)


class _Killed(BaseException):
    """The run's process dying: nothing of it goes on."""


def _committed_files(rig: Rig) -> dict[str, bytes]:
    assert rig.workspace is not None
    [pull] = rig.tracker.pulls.values()
    files = rig.workspace._snapshots[rig.workspace.pushed[pull.head_ref]]
    return {name: data for name, data in files.items() if name != "README.md"}  # the base's


def test_what_a_failed_check_wrote_is_not_taken_into_the_next_attempts_commit(rig: Rig) -> None:
    rig.implementer = ScriptedImplementer(
        [Step(files={"words.py": "N = 1\n"}), Step(files={"words.py": "N = 2\n"})]
    )
    rig.checks = _WritingChecks()
    plan, lease = rig.claim()
    Attempt(rig.parts(), plan.item("T1"), lease).run()
    assert rig.state().state == "pending"  # the check failed: a second attempt
    lease = leases.claim_next(rig.store, "octo/app:PLAN", "w1", 60.0)
    assert lease is not None
    Attempt(rig.parts(), plan.item("T1"), lease).run()
    assert (rig.state().state, rig.state().reason) == ("pr_open", None)
    assert _committed_files(rig) == {"words.py": b"N = 2\n"}  # no report.xml, no rewrite


def test_what_a_check_wrote_when_the_run_died_is_put_back_before_the_work_goes_on(
    rig: Rig,
) -> None:
    rig.checks = _WritingChecks(dies=True)
    plan, lease = rig.claim()
    with pytest.raises(_Killed):
        Attempt(rig.parts(), plan.item("T1"), lease).run()
    rig.clock.advance(61.0)  # its lease lapses; the next run takes the item over
    lease = leases.claim_next(rig.store, "octo/app:PLAN", "w2", 60.0)
    assert lease is not None
    Attempt(rig.parts(), plan.item("T1"), lease).run()
    assert len(rig.implementer.calls) == 1  # the agent had finished: not paid again
    [ready] = [e.payload for e in rig.store.all_events(item="T1") if e.kind == "worktree"][1:]
    assert ready.as_dict()["discarded"] == ["report.xml", "words.py"]
    assert _committed_files(rig) == {"words.py": b"N = 1\n"}
    # What was put back may have been a person's edit, made while no run held the item: the
    # tracked file's change is kept, as a patch.
    saved = Path(str(ready.as_dict()["saved"]))
    assert "+N = 'rewritten by a formatter'" in saved.read_text()


class _DyingReviewer(ScriptedReviewer):
    """A reviewer whose first ask the run dies in (killed while it waited for the answer)."""

    def ask(self, prompt: str, system: str) -> Any:
        if not self.prompts:
            self.prompts.append(prompt)
            raise _Killed
        return super().ask(prompt, system)


def test_a_review_under_way_when_the_run_died_is_counted_once_at_an_unknown_price(
    rig: Rig,
) -> None:
    # 13 reviewer requests reached the provider in a loop of kills; the audit priced 8: the
    # calls a kill cut off were paid and never counted.
    from agent_harness.store.model_events import ModelLost

    rig.reviewer = _DyingReviewer([verdict(True), verdict(True)])
    plan, lease = rig.claim()
    with pytest.raises(_Killed):
        Attempt(rig.parts(), plan.item("T1"), lease).run()
    for worker in ("w2", "w3"):  # the next run takes it over; then once more, for good
        rig.clock.advance(61.0)
        lease = leases.claim_next(rig.store, "octo/app:PLAN", worker, 60.0)
        if lease is not None:
            Attempt(rig.parts(), plan.item("T1"), lease).run()
    lost = [e.payload for e in rig.store.all_events(item="T1") if e.kind == "model.lost"]
    assert lost == [ModelLost(role="reviewer", worker="w1")]
    assert rig.state().state == "pr_open" and len(rig.implementer.calls) == 1
