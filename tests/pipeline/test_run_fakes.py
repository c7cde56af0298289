"""A whole run over fakes: setup refusals, the queue worked to its end, dependencies honoured."""

from __future__ import annotations

import threading
from typing import Any

import pytest

from agent_harness.pipeline.run import Pipeline
from agent_harness.pipeline.settings import RunRefused
from agent_harness.plan.markdown import parse_plan
from agent_harness.store.hostlock import held_by_this_host
from agent_harness.testing.scripted import ScriptedReviewer, verdict
from tests.shared.sessions import wait_for

from .conftest import Rig

pytestmark = pytest.mark.unit

TWO = "### T1: Count words\n\n### T2: Count lines\ndepends on: T1\n"


def pipeline(rig: Rig, plan: str = TWO) -> Pipeline:
    rig.settings.reconcile = False
    return rig.pipeline(plan)


def test_items_become_issues_then_pull_requests_and_a_dependent_waits(rig: Rig) -> None:
    rig.reviewer = ScriptedReviewer([verdict(True), verdict(True)])
    report = pipeline(rig).run()
    by_id = {item.id: item for item in report.items}
    assert by_id["T1"].state == "pr_open" and by_id["T1"].pr_number is not None
    # T2 depends on T1, which is not merged yet: it waits, and the report says why.
    assert by_id["T2"].state == "pending"
    assert by_id["T2"].reason == "waits for T1 (pr_open) to be merged"
    titles = sorted(issue.title for issue in rig.tracker.issues.values())
    assert titles == ["T1: Count words", "T2: Count lines"]
    pull = rig.tracker.pulls[by_id["T1"].pr_number]
    assert (
        f"Closes #{next(i.number for i in rig.tracker.issues.values() if i.title.startswith('T1'))}"
        in pull.body
    )


def test_a_runs_event_count_is_of_what_it_recorded_not_the_whole_log(rig: Rig) -> None:
    # A run with nothing to do said "50 events recorded": the project's whole log.
    rig.reviewer = ScriptedReviewer([verdict(True), verdict(True)])
    first = pipeline(rig).run()
    assert first.events == len(rig.store.all_events(project="octo/app:PLAN")) > 10
    again = pipeline(rig).run()  # T1's pull request open, T2 waiting on it: nothing to do
    assert again.events < 3


def test_an_archived_repository_is_refused_before_any_work(rig: Rig) -> None:
    rig.tracker.info = rig.tracker.info.__class__(
        rig.tracker.repo, "main", rig.tracker.info.clone_url, archived=True
    )
    with pytest.raises(RunRefused, match="is archived"):
        pipeline(rig).run()
    assert rig.implementer.calls == []


def test_names_git_writes_alike_are_refused_before_any_agent(rig: Rig) -> None:
    from agent_harness.plan.model import Plan
    from tests.shared.stores import item

    # T1.2 and T1-2 (ids a backlog or the API may give) were one branch and one worktree:
    # each agent worked over the other's.
    both = Plan(source="backlog.json", items=(item("T1.2"), item("T1-2")))
    with pytest.raises(RunRefused, match=r"items T1\.2 and T1-2 would share a branch"):
        rig.pipeline(both).run()
    assert rig.implementer.calls == []
    # So were two plans keyed v1.2 and v1-2 on one repository.
    rig.reviewer = ScriptedReviewer([verdict(True)] * 2)
    rig.pipeline("### T1: One\nDo it.\n", plan_key="v1.2").run()
    ran = len(rig.implementer.calls)
    with pytest.raises(RunRefused, match=r"plans keyed v1\.2 and v1-2 of .* would share branches"):
        rig.pipeline("### T1: One\nDo it.\n", plan_key="v1-2").run()
    assert len(rig.implementer.calls) == ran
    [other] = rig.pipeline("### T1: One\nDo it.\n", plan_key="v1-3").run().items
    assert other.state == "pr_open" and len(rig.implementer.calls) == ran + 1  # another key
    # Once v1.2's work is merged it holds no branch any more: v1-2 may run.
    from agent_harness.queue.items import record_outcome

    record_outcome(rig.store, f"{rig.tracker.repo}:v1.2", "T1", "merged", {})
    rig.reviewer = ScriptedReviewer([verdict(True)])
    [later] = rig.pipeline("### T1: One\nDo it.\n", plan_key="v1-2").run().items
    assert later.state == "pr_open"


def test_a_reviewer_of_the_implementers_vendor_is_refused(rig: Rig) -> None:
    from agent_harness.review.verdict import SameVendorRefused

    rig.reviewer = ScriptedReviewer([], vendor=rig.implementer.vendor)
    with pytest.raises(SameVendorRefused):
        pipeline(rig).check_setup()


def test_a_spent_run_budget_gives_the_next_items_back_unspent(rig: Rig) -> None:
    from agent_harness.implement.protocol import ImplementResult
    from agent_harness.testing.scripted import ScriptedImplementer, Step

    done = ImplementResult(ok=True, state="done", reason="exited 0", cost_usd=5.0)
    rig.implementer = ScriptedImplementer([Step(files={"a.py": "a\n"}, result=done)])
    rig.settings.run_cost_usd = 1.0
    report = pipeline(rig, "### T1: One\n\n### T2: Two\n").run()
    by_id = {item.id: item for item in report.items}
    assert report.stopped_by_budget and report.cost_usd == 5.0
    assert report.stopped_because == "run cost budget spent: $5.00 of $1.00 (budgets.run_cost_usd)"
    # T1's agent was paid; its reviewer is not, and its checked commit waits for the next run.
    assert (by_id["T1"].state, by_id["T1"].attempts) == ("waiting", 0)
    assert rig.reviewer.prompts == []
    assert (by_id["T2"].state, by_id["T2"].attempts) in {("pending", 0), ("waiting", 0)}


class LeftoverHost:
    """Sessions a killed run left behind (dead panes), as a session host reports them."""

    kind = "tmux"

    def __init__(self, names: set[str]) -> None:
        self.names = set(names)
        self.killed: list[str] = []

    def exists(self, name: str) -> bool:
        return name in self.names

    def status(self, name: str) -> Any:
        from agent_harness.sessions.protocol import SessionStatus

        return SessionStatus(False, 0 if name in self.names else None)  # dead panes

    def kill(self, name: str) -> None:
        self.killed.append(name)
        self.names.discard(name)


def test_sessions_of_items_that_ended_are_closed_when_the_run_ends(rig: Rig) -> None:
    from agent_harness.testing.scripted import ScriptedImplementer, Step

    rig.implementer = ScriptedImplementer([Step(files={".github/workflows/x.yml": "on: push\n"})])
    run = pipeline(rig, "### T1: One\n\n### T2: Two\ndepends on: T1\n")
    leftovers = {run.session_name("T1"), run.session_name("T2"), "someone-elses"}
    host = LeftoverHost(leftovers)
    rig.implementer.host = host  # type: ignore[attr-defined]
    report = run.run()
    states = {item.id: item.state for item in report.items}
    assert states == {"T1": "failed", "T2": "skipped"}
    assert sorted(host.killed) == sorted([run.session_name("T1"), run.session_name("T2")])
    assert host.names == {"someone-elses"}  # never a session that is not this run's


def test_items_another_host_holds_are_waited_for_and_taken_over_when_it_dies(rig: Rig) -> None:
    from agent_harness.queue import items, leases
    from agent_harness.store.events import HeldElsewhere

    plan = "### T1: One\n\n### T2: Two\n"
    items.enqueue(rig.store, "octo/app:PLAN", parse_plan(plan).items)
    # Host h3 claimed T1 and then died: its lease runs 30 s more and nobody renews it.
    theirs = leases.claim_next(rig.store, "octo/app:PLAN", "h3-abc123/w1", 30.0)
    assert theirs is not None and theirs.item_id == "T1"
    heard: list[HeldElsewhere] = []
    run = pipeline(rig, plan)
    run.sleep = rig.clock.sleep  # waiting moves the fake clock
    run.parts.observer = lambda kind, item, payload: (
        heard.append(payload) if isinstance(payload, HeldElsewhere) else None
    )
    rig.reviewer = ScriptedReviewer([verdict(True), verdict(True)])
    run.parts.reviewer = rig.reviewer
    report = run.run()
    assert {item.id: item.state for item in report.items} == {"T1": "pr_open", "T2": "pr_open"}
    assert heard and heard[0].items == ["T1"] and heard[0].hosts == ["h3-abc123"]
    assert heard[0].describe() == "1 item held by host h3-abc123, lease ends in 30 s; waiting"


class LapsesAtRead:
    """A store clock that reads `before` until its `lapse_at`-th read of a look, then `after`:
    the moment another host's lease lapses, put at each point of the look in turn."""

    def __init__(self, before: float, after: float) -> None:
        self.before, self.after = before, after
        self.reads = 0
        self.lapse_at = 10**9

    def __call__(self) -> float:
        self.reads += 1
        return self.before if self.reads < self.lapse_at else self.after


def test_a_lease_that_lapses_while_the_run_looks_is_never_taken_for_done(rig: Rig) -> None:
    from agent_harness.pipeline.fleetrun import IdleWatch
    from agent_harness.queue import items, leases

    plan = "### T1: One\n"
    items.enqueue(rig.store, "octo/app:PLAN", parse_plan(plan).items)
    theirs = leases.claim_next(rig.store, "octo/app:PLAN", "h3-abc123/w1", 30.0)
    assert theirs is not None
    run = pipeline(rig, plan)
    clock = LapsesAtRead(theirs.expires_at - 0.001, theirs.expires_at + 0.001)
    run.store.clock = clock  # the store's clock: where the lease lapses is put in each place
    for lapse_at in range(1, 8):
        clock.reads, clock.lapse_at = 0, lapse_at
        done = run.idle_step(IdleWatch(patience_s=60.0))
        assert not done, f"the lease lapsing at read {lapse_at} ended the run without T1"


def test_with_no_wait_the_run_ends_when_its_own_work_is_done(rig: Rig) -> None:
    from agent_harness.queue import items, leases

    plan = "### T1: One\n\n### T2: Two\n"
    items.enqueue(rig.store, "octo/app:PLAN", parse_plan(plan).items)
    assert leases.claim_next(rig.store, "octo/app:PLAN", "h3-abc123/w1", 30.0) is not None
    run = pipeline(rig, plan)
    rig.settings.wait_for_others = False
    report = run.run()
    assert {item.id: item.state for item in report.items} == {"T1": "claimed", "T2": "pr_open"}


def test_the_pull_request_shows_cost_as_money_and_unknown_as_unknown(rig: Rig) -> None:
    # 0.00007 * 2 is 0.00014000000000000001 in floating point: the body must not say so.
    rig.reviewer = ScriptedReviewer(
        [verdict(True, tokens_in=1234, tokens_out=56, cost_usd=0.00007 * 2)]
    )
    report = pipeline(rig, "### T1: Count words\n").run()
    body = rig.tracker.pulls[report.items[0].pr_number or 0].body
    [reviewer_row] = [line for line in body.splitlines() if line.startswith("| reviewer")]
    assert reviewer_row.endswith("| 1,234 | 56 | $0.00014 |")
    assert "0.00014000000000000001" not in body
    [implementer_row] = [line for line in body.splitlines() if line.startswith("| implementer")]
    assert implementer_row.endswith("| unknown | unknown | unknown |")
    # And the run's report: the review's cost known, the agent's run of unknown price apart.
    assert (report.cost_usd, report.unpriced) == (pytest.approx(0.00014), 1)


def test_a_run_stays_to_deliver_work_the_tracker_refused_for_a_while(rig: Rig) -> None:
    # The soak found it: a 5xx burst on POST /pulls parked T1's approved work for 60 s, the
    # run saw nothing to claim and ended, and nothing came back to deliver it.
    from agent_harness.store.events import DeliveryDue
    from agent_harness.tracker.protocol import TrackerError

    outage = TrackerError("POST /repos/octo/app/pulls failed 5 times; last: HTTP 502")
    rig.tracker.fail_next("create_pull", outage)
    heard: list[DeliveryDue] = []
    run = pipeline(rig, "### T1: One\n")
    run.sleep = rig.clock.sleep  # waiting moves the fake clock
    run.parts.observer = lambda kind, item, payload: (
        heard.append(payload) if isinstance(payload, DeliveryDue) else None
    )
    report = run.run()
    assert {item.id: item.state for item in report.items} == {"T1": "pr_open"}
    assert len(heard) == 1 and heard[0].items == ["T1"]  # said once, not at every poll
    assert heard[0].describe() == "delivery of T1 tried again in 60 s; waiting"
    assert len(rig.implementer.calls) == 1 and len(rig.reviewer.prompts) == 1  # not paid twice


def test_a_token_refused_at_delivery_stops_the_run_and_fails_no_item(rig: Rig) -> None:
    # The soak found it: the token began answering 401 partway through a run, and every item
    # that reached delivery failed for it, so the restart with a good token never delivered
    # their approved work. The work waits instead, and the run stops saying why.
    from agent_harness.queue.items import list_items
    from agent_harness.tracker.protocol import AuthError

    refused = AuthError("bad credentials for https://api.example (check GH_TOKEN / GITHUB_TOKEN)")
    rig.reviewer = ScriptedReviewer([verdict(True)] * 3)
    rig.tracker.fail_next("create_pull", refused)
    run = pipeline(rig, "### T1: One\n\n### T2: Two\n")
    with pytest.raises(AuthError, match="bad credentials"):
        run.run()
    states = {r.id: r.state.value for r in list_items(rig.store, run.parts.project)}
    assert "failed" not in states.values()
    assert states["T1"] in ("pending", "waiting")
    calls = len(rig.implementer.calls)

    report = pipeline(rig, "### T1: One\n\n### T2: Two\n").run()  # the token is fixed
    assert {item.id: item.state for item in report.items} == {"T1": "pr_open", "T2": "pr_open"}
    assert len(rig.implementer.calls) - calls <= 1  # T1's approved work was not redone


def _fail_the_look_after_the_pull_opens(rig: Rig, run: Pipeline, error: Exception) -> list[Any]:
    """Make the tracker fail the first look at pull requests after T1's opens (the run's look
    between claims); returns the notes the run gives its observers about it."""
    from agent_harness.store.events import PullOpened, TrackerUnanswered

    heard: list[Any] = []

    def observe(kind: str, item: str, payload: Any) -> None:
        if isinstance(payload, PullOpened):
            rig.tracker.fail_next("list_pulls", error)
        elif isinstance(payload, TrackerUnanswered):
            heard.append(payload)

    run.parts.observer = observe
    run.sleep = rig.clock.sleep
    return heard


def test_a_tracker_down_at_a_look_between_claims_is_said_and_the_run_ends_as_it_would(
    rig: Rig,
) -> None:
    # The look for merges and review rounds between claims let a 5xx (past the retries) out
    # of the run as an exception: no report, and another plan's workers cut off mid-item.
    from agent_harness.tracker.protocol import Unreachable

    rig.reviewer = ScriptedReviewer([verdict(True)])
    rig.settings.reconcile = True
    run = rig.pipeline("### T1: One\n")
    down = Unreachable("GET /repos/octo/app/pulls failed 5 times; last: HTTP 502")
    heard = _fail_the_look_after_the_pull_opens(rig, run, down)
    report = run.run()
    assert {item.id: item.state for item in report.items} == {"T1": "pr_open"}
    [note] = heard
    assert not note.stops_run
    assert note.describe() == (
        "the tracker did not answer a look between claims (GET /repos/octo/app/pulls failed "
        "5 times; last: HTTP 502); going on without its news"
    )


def test_a_token_refused_at_a_look_between_claims_stops_the_run_with_work_kept(rig: Rig) -> None:
    from agent_harness.queue.items import list_items
    from agent_harness.tracker.protocol import AuthError

    rig.reviewer = ScriptedReviewer([verdict(True)])
    rig.settings.reconcile = True
    run = rig.pipeline("### T1: One\n")
    heard = _fail_the_look_after_the_pull_opens(rig, run, AuthError("bad credentials"))
    with pytest.raises(AuthError, match="bad credentials"):
        run.run()
    assert [n.stops_run for n in heard] == [True]
    states = {r.id: r.state.value for r in list_items(rig.store, run.parts.project)}
    assert states == {"T1": "pr_open"}


def test_a_second_run_with_the_same_host_id_on_one_database_is_refused(rig: Rig) -> None:
    """Another host started with this host's --host-id holds the database's run lock: this run
    stops before it claims anything, instead of taking that host's live leases as its own."""
    run = pipeline(rig)
    other_host = held_by_this_host(rig.store, f"run {run.project} test", wait=False)
    with other_host, pytest.raises(RunRefused, match="with host id test is using this database"):
        run.run()
    assert not [e for e in rig.store.all_events() if e.kind == "claimed"]
    rig.reviewer = ScriptedReviewer([verdict(True)])
    report = pipeline(rig).run()  # once the other host is gone, the same run goes ahead
    assert {item.id: item.state for item in report.items}["T1"] == "pr_open"


def test_a_run_that_lost_its_host_id_to_another_run_halts_and_one_that_kept_it_goes_on(
    rig: Rig,
) -> None:
    from agent_harness.store.hostlock import Held

    run = pipeline(rig)
    run._host_held = Held(lambda: True)  # lost with its connection, taken again: goes on
    run.check_host_lock()
    assert run.parts.halted == []
    run._host_held = Held(lambda: False)  # another run under the same host id took it
    run.check_host_lock()
    [stop] = run.parts.halted
    assert isinstance(stop, RunRefused)
    assert "another run under that host id took it and its leases; this run stops" in str(stop)


def test_an_item_claimed_after_it_left_the_plan_is_withdrawn_not_crashed(rig: Rig) -> None:
    # Taken out of the plan while its pull request was open, then sent back by a round: the
    # worker once crashed on it (KeyError) and spent its attempts.
    both = "### T1: Count words\nMake it.\n\n### T2: Other\nMake it.\n"
    _plan, lease = rig.claim(both, "T1")
    pipeline = rig.pipeline("### T2: Other\nMake it.\n")
    pipeline.handle(lease)
    record = rig.state("T1")
    assert (record.state, record.reason) == ("skipped", "no longer in the plan")
    assert rig.implementer.calls == []


def test_a_drain_asked_while_an_item_ends_stops_the_next_claim_at_once(rig: Rig) -> None:
    from agent_harness.queue import control
    from agent_harness.testing.scripted import ScriptedImplementer, Step

    run = pipeline(rig, "### T1: One\n\n### T2: Two\n")

    class Draining(ScriptedImplementer):
        """An agent whose run ends the moment a person asks for a drain."""

        def implement(self, *args: Any, **kwargs: Any) -> Any:
            done = super().implement(*args, **kwargs)
            control.set_control(rig.store, "draining", run.project, by="a person")
            return done

    rig.implementer = Draining([Step(files={"one.py": "x = 1\n"})])
    run.parts.implementer = rig.implementer
    report = run.run()
    # Before: the run looked at the controls twice a second, so T2 was claimed (and its agent
    # paid) in between.
    states = {item.id: item.state for item in report.items}
    assert states == {"T1": "pr_open", "T2": "pending"} and report.drained
    assert len(rig.implementer.calls) == 1


def test_a_database_that_fails_mid_attempt_gives_the_attempt_back_not_a_tracker_failure(
    rig: Rig,
) -> None:
    # Counted as a failure of the tracker, and its attempt spent, when PostgreSQL dropped the
    # run's connection under an agent.
    from agent_harness.store.errors import StoreError
    from agent_harness.testing.scripted import ScriptedImplementer, Step

    run = pipeline(rig, "### T1: One\n")

    class LosesTheDatabase(ScriptedImplementer):
        def implement(self, *args: Any, **kwargs: Any) -> Any:
            if not self.calls:
                self.calls.append(("lost", args, kwargs))
                raise StoreError("postgresql://h/db", "terminating connection")
            return super().implement(*args, **kwargs)

    rig.implementer = LosesTheDatabase([Step(files={"one.py": "x = 1\n"})])
    run.parts.implementer = rig.implementer
    run.settings.max_attempts = 1  # a spent attempt would have failed the item
    report = run.run()
    assert [(i.id, i.state) for i in report.items] == [("T1", "pr_open")]
    kinds = [e.kind for e in rig.store.all_events(project=run.project, item="T1")]
    assert "attempt_failed" not in kinds and "deferred" in kinds


def test_a_file_larger_than_a_push_may_carry_ends_the_attempt_before_checks_or_review(
    rig: Rig,
) -> None:
    # A 120 MB file went to review and a pull request; GitHub refuses the push of any file over
    # 100 MiB. The limit is lowered here so the test writes bytes, not megabytes.
    from agent_harness.testing.scripted import ScriptedImplementer, Step

    run = pipeline(rig, "### T1: One\n")
    run.settings.largest_file_bytes = 100
    run.settings.max_attempts = 1
    rig.implementer = ScriptedImplementer([Step(files={"huge.bin": "x" * 500, "ok.py": "x = 1\n"})])
    run.parts.implementer = rig.implementer
    report = run.run()
    [item] = report.items
    assert item.state == "failed"
    assert item.reason == (
        "the change holds files larger than a push may carry (100 bytes): huge.bin (500 bytes) "
        "(attempt budget 1 spent)"
    )
    assert rig.reviewer.prompts == [] and rig.tracker.pulls == {}


def _pool_state(rig: Rig, project: str) -> str | None:
    from agent_harness.queue import control

    [shown] = control.get_control(rig.store, project)
    return None if shown.pool is None else str(shown.pool.state)


def test_a_drain_taken_back_by_a_resume_leaves_a_run_that_ends_when_its_work_does(
    rig: Rig,
) -> None:
    # The run stayed up, idle, with every item delivered: it waited for its drained pool to
    # stop, and the resume had set it running again.
    from agent_harness.queue import control
    from agent_harness.testing.scripted import ScriptedImplementer, Step

    rig.reviewer = ScriptedReviewer([verdict(True), verdict(True)])
    run = pipeline(rig, "### T1: One\n\n### T2: Two\n")

    class DrainThenResume(ScriptedImplementer):
        """An agent during whose work a person asks for a drain, then takes it back."""

        def implement(self, *args: Any, **kwargs: Any) -> Any:
            done = super().implement(*args, **kwargs)
            if len(self.calls) == 1:
                control.set_control(rig.store, "draining", run.project, by="a person")
                wait_for(lambda: _pool_state(rig, run.project) == "draining")
                control.set_control(rig.store, "running", run.project, by="a person")
                wait_for(lambda: _pool_state(rig, run.project) == "running")
            return done

    rig.implementer = DrainThenResume(
        [Step(files={"one.py": "x = 1\n"}), Step(files={"two.py": "y = 2\n"})]
    )
    run.parts.implementer = rig.implementer
    ended: list[Any] = []
    worker = threading.Thread(target=lambda: ended.append(run.run()), daemon=True)
    worker.start()
    worker.join(30)
    assert ended, "the run never ended"
    [report] = ended
    assert {item.id: item.state for item in report.items} == {"T1": "pr_open", "T2": "pr_open"}
    assert not report.drained


def test_a_run_refused_by_the_run_lock_changes_nothing_another_run_was_asked(rig: Rig) -> None:
    # A second `run` of a draining project dropped the live run's drain ("the drain asked of a
    # run that has since ended"), then was refused by the lock: the live run claimed again.
    from agent_harness.pipeline.fleetrun import FleetRun
    from agent_harness.pipeline.settings import RunRefused

    live, second = pipeline(rig), pipeline(rig)
    heard: list[str] = []
    fleet = FleetRun([second])
    fleet.on_locked = lambda: heard.append("told")
    with live.run_lock(), pytest.raises(RunRefused):
        fleet.run()
    assert heard == []


def test_a_pull_request_says_whether_its_success_check_was_run_or_only_read(rig: Rig) -> None:
    # A `check:` without backticks was shown as "Success check: …" though nothing ran it.
    plan = (
        "### T1: Count words\ncheck: `true`\n\n"
        "### T2: Count lines\ncheck: python -m pytest -q tests/test_lines.py\n"
    )
    rig.reviewer = ScriptedReviewer([verdict(True), verdict(True)])
    report = pipeline(rig, plan).run()
    body = {item.id: rig.tracker.pulls[item.pr_number].body for item in report.items}
    assert "Success check (run with the checks below): `true`" in body["T1"]
    assert (
        "Success criterion (for the reviewer; no check runs it): python -m pytest -q "
        "tests/test_lines.py" in body["T2"]
    )
    assert "Success check" not in body["T2"]


def test_an_item_whose_issue_a_person_closed_is_not_worked_until_it_is_reopened(rig: Rig) -> None:
    from dataclasses import replace

    from agent_harness.errors import UsageError
    from agent_harness.queue import items
    from agent_harness.queue.retries import retry

    pipeline(rig).prepare()  # the issues are made
    [number] = [n for n, issue in rig.tracker.issues.items() if issue.title.startswith("T1")]
    # A person closes T1's issue on the tracker: won't do, or done another way.
    rig.tracker.issues[number] = replace(rig.tracker.issues[number], state="closed")
    rig.reviewer = ScriptedReviewer([verdict(True)])
    report = pipeline(rig).run()
    by_id = {item.id: item for item in report.items}
    reason = f"its issue #{number} is closed; reopen it to run this item"
    assert (by_id["T1"].state, by_id["T1"].reason) == ("skipped", reason)
    assert rig.implementer.calls == [] and rig.tracker.pulls == {}
    with pytest.raises(UsageError, match=rf"T1's issue #{number} is closed; reopen it"):
        retry(rig.store, "octo/app:PLAN", "T1")
    # Taken out of the plan meanwhile, it stays skipped: it was put back to pending, claimed
    # and released again for want of its plan entry (review).
    pipeline(rig, "### T2: Count lines\n").prepare()
    assert items.get_item(rig.store, "octo/app:PLAN", "T1").state == "skipped"
    # Reopened, it is worked by the next run as if never closed.
    rig.tracker.issues[number] = replace(rig.tracker.issues[number], state="open")
    again = {item.id: item for item in pipeline(rig).run().items}
    assert again["T1"].state == "pr_open"


def test_a_closed_issue_whose_item_has_a_pull_request_of_ours_is_left_to_reconcile(
    rig: Rig,
) -> None:
    from dataclasses import replace

    from agent_harness.queue import items
    from agent_harness.store.round_events import PullRound

    # T1's pull request is open and a round sent it back to its agent (pending); a person
    # merges it, which closes the issue before reconcile labels it: the item is ours to follow.
    rig.reviewer = ScriptedReviewer([verdict(True), verdict(True)])
    first = {item.id: item for item in pipeline(rig).run().items}
    assert first["T1"].state == "pr_open"
    round_ = PullRound(
        pr=first["T1"].pr_number or 0, round=1, trigger="review", head_sha="0" * 40,
        action="agent", summary="a review asked for changes",
    )  # fmt: skip
    assert items.reopen_for_round(rig.store, "octo/app:PLAN", "T1", round_)
    [number] = [n for n, issue in rig.tracker.issues.items() if issue.title.startswith("T1")]
    rig.tracker.issues[number] = replace(rig.tracker.issues[number], state="closed")
    pipeline(rig).prepare()
    assert items.get_item(rig.store, "octo/app:PLAN", "T1").state == "pending"


def test_a_repository_the_database_knows_in_other_letters_is_refused(rig: Rig) -> None:
    from agent_harness.queue import items

    # An earlier run was given --repo OCTO/App: the same repository to GitHub.
    items.enqueue(rig.store, "OCTO/App:PLAN", parse_plan(TWO).items)
    with pytest.raises(
        RunRefused, match=r"runs that plan as OCTO/App:PLAN already .*--repo OCTO/App"
    ):
        pipeline(rig).run()
    assert rig.implementer.calls == [] and rig.tracker.issues == {}
