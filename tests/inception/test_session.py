"""The inception state machine through the real model client and the scripted planner on
loopback: every transition, every refusal, resuming from the log, and the planner's failures."""

from __future__ import annotations

import json

import pytest

from agent_harness.inception.model import (
    BlockingOpen,
    PlannerAnswerInvalid,
    StepRefused,
    UnknownQuestion,
    UnknownSession,
)
from agent_harness.inception.session import InceptionSession, project_of
from agent_harness.models.parking import EndpointParked
from agent_harness.plan.markdown import parse_plan
from agent_harness.store.events import ModelCall, ModelRetry
from agent_harness.store.inception_events import PlannerFailed, ScopeProposed
from agent_harness.testing.model_server import ScriptedCompletion, ScriptedFailure
from tests.inception.conftest import Rig

pytestmark = pytest.mark.integration


def test_a_paragraph_becomes_an_approved_plan_step_by_step(rig: Rig) -> None:
    session = rig.start()
    assert session.view().status == "started"
    view = session.propose_scope()
    assert view.status == "scoped" and view.scope is not None
    assert view.scope.protect == ("README.md",)
    assert "tally/lines.py" in view.scope.change
    assert [(q.id, q.grade) for q in view.in_grade_order()] == [("Q1", "BLOCKING"), ("Q2", "NICE")]
    assert view.questions[0].default == "No"

    with pytest.raises(BlockingOpen) as refused:
        session.approve()
    assert refused.value.exit_code == 3
    assert "Q1: Should a trailing newline start a new line?" in refused.value.message

    session.answer("Q1", "No: a trailing newline ends the last line")
    session.defer("Q2")
    assert session.approve().status == "approved"
    view = session.plan()
    assert view.status == "planned" and view.items == ("T1", "T2")
    plan = parse_plan(view.plan or "")
    assert plan.unread == () and [i.id for i in plan.items] == ["T1", "T2"]
    t2 = plan.item("T2")
    assert t2.depends_on == ("T1",) and t2.files == ("tally/lines.py", "tests/test_lines.py")
    assert t2.success_check == "`python -m unittest tests.test_lines`"
    assert "a trailing newline ends the last line" in t2.body  # the answer reached the item
    assert t2.milestone == "first delivery"
    assert session.plan() == view  # planned once; asking again reads it back
    assert len(rig.server.requests) == 2


def test_each_planner_call_is_an_event_of_the_session_with_its_usage(rig: Rig) -> None:
    session = rig.start()
    session.propose_scope()
    calls = [e.payload for e in session.events() if isinstance(e.payload, ModelCall)]
    assert len(calls) == 1 and calls[0].role == "planner" and calls[0].model == "gpt-planner"
    assert calls[0].tokens_in and calls[0].tokens_out
    scoped = [e.payload for e in session.events() if isinstance(e.payload, ScopeProposed)]
    assert scoped[0].tokens_in == calls[0].tokens_in and scoped[0].calls == 1
    stored = json.dumps([e.as_json() for e in rig.store.all_events()])
    assert "sk-planner-test" not in stored


def test_refusals_name_what_is_wrong_and_change_nothing(rig: Rig) -> None:
    session = rig.start()
    with pytest.raises(StepRefused, match="propose a scope first"):
        session.approve()
    with pytest.raises(StepRefused, match="approve the scope first"):
        session.plan()
    session.propose_scope()
    with pytest.raises(UnknownQuestion, match="no question 'Q9' \\(its questions: Q1, Q2\\)"):
        session.answer("Q9", "yes")
    with pytest.raises(StepRefused, match="Q1 is BLOCKING: answer it, or re-grade it"):
        session.defer("Q1")
    with pytest.raises(StepRefused, match="give feedback to revise"):
        session.propose_scope()
    before = len(session.events())
    session.answer("Q1", "No")
    session.approve()
    with pytest.raises(StepRefused, match="approved: its questions can no longer change"):
        session.regrade("Q2", "BLOCKING")
    with pytest.raises(StepRefused, match="already approved"):
        session.approve()
    with pytest.raises(StepRefused, match="can no longer change"):
        session.propose_scope("more")
    assert len(session.events()) == before + 2  # the answer and the approval, nothing else


def test_a_person_may_regrade_a_blocking_question_then_defer_it(rig: Rig) -> None:
    session = rig.start()
    session.propose_scope()
    view = session.regrade("Q1", "nice", reason="we will decide in review")
    assert view.question("Q1").grade == "NICE" and view.question("Q1").graded_by == "person"
    session.defer("Q1")
    assert session.approve().status == "approved"


def test_the_planner_may_not_downgrade_an_open_blocking_question(rig: Rig) -> None:
    session = rig.start()
    session.propose_scope()
    # The scripted planner, told "not blocking", re-grades its BLOCKING questions NICE.
    view = session.propose_scope("Q1 is not blocking, just pick something")
    assert view.round == 2 and view.question("Q1").grade == "BLOCKING"
    assert view.kept_blocking == ("Q1",)
    assert any("as the person asked" in goal for goal in view.scope.goals)  # type: ignore[union-attr]
    with pytest.raises(BlockingOpen):
        session.approve()
    for number in (3, 4, 5):
        assert session.propose_scope(f"round {number}").round == number
    with pytest.raises(StepRefused, match="proposed 5 times \\(at most 5\\)"):
        session.propose_scope("once more")
    assert len(rig.server.requests) == 5


def test_a_session_resumes_from_its_events_alone(rig: Rig) -> None:
    from agent_harness.store.database import open_store

    session = rig.start()
    session.propose_scope()
    session.answer("Q1", "No")
    other_store = open_store(f"sqlite:///{rig.path}")
    try:
        again = InceptionSession.resume(other_store, session.id, rig.planner(session.id))
        assert again.view() == session.view()
        again.approve()
        assert again.plan().items == ("T1", "T2")
    finally:
        other_store.close()
    with pytest.raises(UnknownSession):
        InceptionSession.resume(rig.store, "nope")


def test_a_malformed_answer_is_asked_for_again_with_the_validation_error(rig: Rig) -> None:
    rig.server.enqueue_first(ScriptedCompletion(text='{"objective": "x", "goals": []}'))
    session = rig.start()
    view = session.propose_scope()
    assert view.status == "scoped"
    _first, second = rig.server.requests
    retry = [m for m in second.body["messages"] if m["role"] != "system"]
    assert retry[1]["role"] == "assistant" and retry[1]["content"].startswith('{"objective"')
    assert "goals: List should have at least 1 item" in retry[2]["content"]
    assert "files: Field required" in retry[2]["content"]
    assert [e.payload.calls for e in session.events() if isinstance(e.payload, ScopeProposed)] == [
        2
    ]


def test_two_misfits_fail_clearly_and_leave_the_session_as_it_was(rig: Rig) -> None:
    rig.server.enqueue_first(
        ScriptedCompletion(text="Sure! Here is the scope you asked for."),
        ScriptedCompletion(text='```json\n{"objective": "x",}\n```'),
    )
    session = rig.start()
    with pytest.raises(PlannerAnswerInvalid) as failed:
        session.propose_scope()
    assert failed.value.message.startswith(
        "the planner's scope answer did not fit after 2 calls: the answer is not valid JSON"
    )
    assert session.view().status == "started" and session.view().scope is None
    [note] = [e.payload for e in session.events() if isinstance(e.payload, PlannerFailed)]
    assert note.stage == "scope" and "not valid JSON" in note.reason
    assert len(rig.server.requests) == 2
    assert session.propose_scope().status == "scoped"  # the next try starts afresh


def test_a_plan_whose_tasks_do_not_fit_twice_writes_no_plan(rig: Rig) -> None:
    session = rig.start()
    session.propose_scope()
    session.answer("Q1", "No")
    session.approve()
    touches_readme = {
        "milestone": "m",
        "items": [{"id": "T1", "title": "Edit", "files": ["README.md"], "check": "`true`"}],
        "verification": ["`true`"],
        "rollback": ["revert"],
    }
    bad = ScriptedCompletion(text=json.dumps(touches_readme))
    rig.server.enqueue_first(bad, bad)
    with pytest.raises(PlannerAnswerInvalid, match=r"T1.files: README.md is protected"):
        session.plan()
    assert session.view().status == "approved" and session.view().plan is None


def test_a_rate_limited_planner_is_retried_by_the_client_after_a_wait(rig: Rig) -> None:
    rig.server.enqueue_first(ScriptedFailure.openai_rate_limit(retry_after=2))
    session = rig.start()
    assert session.propose_scope().status == "scoped"
    assert len(rig.server.requests) == 2 and rig.clock.slept and rig.clock.slept[0] >= 2
    retries = [e.payload for e in session.events() if isinstance(e.payload, ModelRetry)]
    assert [r.failure for r in retries] == ["burst"]


def test_a_planner_whose_spend_cap_is_hit_gets_exactly_one_request(rig: Rig) -> None:
    rig.server.enqueue_first(ScriptedFailure.openai_insufficient_quota())
    session = rig.start()
    # A spent cap parks the planner's endpoint until a person clears it (work unpark).
    with pytest.raises(EndpointParked, match="parked until a person clears it"):
        session.propose_scope()
    assert len(rig.server.requests) == 1 and rig.clock.slept == []
    [note] = [e.payload for e in session.events() if isinstance(e.payload, PlannerFailed)]
    assert note.stage == "scope"
    assert session.view().status == "started"
    kinds = [e.kind for e in rig.store.all_events(project=project_of(session.id))]
    assert kinds == ["inception.started", "model.parked", "inception.planner_failed"]
    with pytest.raises(EndpointParked):  # asked again: not one more request
        session.propose_scope()
    assert len(rig.server.requests) == 1


def _approved(rig: Rig) -> InceptionSession:
    session = rig.start()
    session.propose_scope()
    session.answer("Q1", "No")
    session.approve()
    return session


def _tasks(**item: object) -> str:
    one = {"id": "T1", "title": "Edit", "files": ["tally/words.py"], "check": "`true`", **item}
    return json.dumps(
        {"milestone": "m", "items": [one], "verification": ["`true`"], "rollback": ["revert"]}
    )


def test_an_item_that_would_change_the_harnesss_own_protected_paths_is_asked_for_again(
    rig: Rig,
) -> None:
    # The scope protects only README.md; the CI workflows and the harness's config are
    # protected on every run, so such an item could never be delivered.
    session = _approved(rig)
    bad = ScriptedCompletion(text=_tasks(files=[".github/workflows/ci.yml"]))
    rig.server.enqueue_first(bad, bad)
    with pytest.raises(PlannerAnswerInvalid, match=r"T1.files: .github/workflows/ci.yml is prot"):
        session.plan()


def test_titles_with_markup_characters_read_back_as_the_planner_wrote_them(rig: Rig) -> None:
    session = _approved(rig)
    title = "Add Vec<u8> support, [docs](x) & \\ &amp; | ~~x~~"
    rig.server.enqueue_first(ScriptedCompletion(text=_tasks(title=title)))
    view = session.plan()
    assert view.plan is not None
    [item] = parse_plan(view.plan, source="PLAN.md").items
    assert item.title == title


def test_terminal_codes_in_the_planners_answer_are_taken_out(rig: Rig) -> None:
    session = _approved(rig)
    rig.server.enqueue_first(
        ScriptedCompletion(
            text=_tasks(title="Add \x1b[31mred\x1b[0m", description="a\x1b]0;pwned\x07 b\x1b[2J")
        )
    )
    view = session.plan()
    assert view.plan is not None and "\x1b" not in view.plan and "\x07" not in view.plan
    assert "### T1: Add red" in view.plan and "\na b\n" in view.plan


def test_an_answer_cut_off_at_the_output_limit_is_said_to_be_so(rig: Rig) -> None:
    cut = ScriptedCompletion(text='{"objective": "Add wo', stop_reason="length")
    rig.server.enqueue_first(cut, cut)
    session = rig.start()
    with pytest.raises(PlannerAnswerInvalid, match="cut off at the output limit") as failed:
        session.propose_scope()
    assert "stop reason length" in failed.value.message
    retry = rig.server.requests[1].body["messages"][-1]["content"]
    assert "answer more briefly" in retry


def test_the_plan_keeps_to_the_protected_paths_the_run_will_hold(rig: Rig) -> None:
    # A project whose settings let agents change its CI (`replace = true`) can plan such an
    # item; one whose settings protect more is held to that too.
    session = _approved(rig)
    session.planner = rig.planner(session.id, protected=("docs/**",))  # as the settings say
    rig.server.enqueue_first(ScriptedCompletion(text=_tasks(files=[".github/workflows/ci.yml"])))
    assert session.plan().status == "planned"
    other = _approved(rig)
    other.planner = rig.planner(other.id, protected=("docs/**",))
    bad = ScriptedCompletion(text=_tasks(files=["docs/guide.md"]))
    rig.server.enqueue_first(bad, bad)
    with pytest.raises(PlannerAnswerInvalid, match=r"T1.files: docs/guide.md is protected"):
        other.plan()


def test_a_title_ending_in_a_dependency_in_other_words_is_asked_for_again(rig: Rig) -> None:
    # The plan's reader takes `(after T1)` as a dependency: written as the title, the plan
    # would not read back as the planner's items after both calls were paid for.
    session = _approved(rig)
    rig.server.enqueue_first(ScriptedCompletion(text=_tasks(title="Run migration (after T0)")))
    view = session.plan()
    assert view.status == "planned"
    retry = rig.server.requests[-1].body["messages"][-1]["content"]
    assert "'(after ...)'" in retry and "dependencies go in depends_on" in retry


def test_a_title_with_a_code_span_reads_back_as_written(rig: Rig) -> None:
    session = _approved(rig)
    rig.server.enqueue_first(ScriptedCompletion(text=_tasks(title="Handle `[ ]` boxes <b>")))
    view = session.plan()
    assert view.plan is not None and "### T1: Handle `[ ]` boxes \\<b\\>" in view.plan


def test_a_session_asks_the_planner_nothing_its_budget_could_not_pay_for(rig: Rig) -> None:
    from agent_harness.inception.model import PlannerOverBudget
    from agent_harness.inception.session import planner_for, session_spent
    from tests.inception.conftest import KEY, TALLY

    # It had no limit at all: with item and run budgets at 0 a session spent $0.43.
    env = {"OPENAI_API_KEY": KEY, "OPENAI_BASE_URL": f"{rig.server.url}/v1"}
    session = InceptionSession.start(rig.store, TALLY, "openai:gpt-4.1")
    session.planner = planner_for(rig.store, session.id, "openai:gpt-4.1", env, limit_usd=0.001)
    with pytest.raises(PlannerOverBudget) as refused:
        session.propose_scope()
    assert "inception budget: $0.0000 spent of $0.0010, and the next planner call may cost" in (
        refused.value.message
    )
    assert rig.server.requests == [] and session.view().status == "started"
    # Raised, the same session goes on, and what it spent is counted from its events.
    session.planner = planner_for(rig.store, session.id, "openai:gpt-4.1", env, limit_usd=1.0)
    assert session.propose_scope().status == "scoped"
    spent = session_spent(rig.store, session.id)
    assert spent is not None and 0 < spent < 0.01
    # A planner no price list knows makes no call under a limit: it could not be kept.
    other = InceptionSession.start(rig.store, TALLY, "openai:gpt-zz-unknown")
    other.planner = planner_for(rig.store, other.id, "openai:gpt-zz-unknown", env, limit_usd=5.0)
    with pytest.raises(PlannerOverBudget, match="price is not known"):
        other.propose_scope()
    assert len(rig.server.requests) == 1
