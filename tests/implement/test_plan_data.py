"""Reading a planner's answer into steps, the mechanical verifier, and the saved plan file."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from agent_harness.errors import ConfigError
from agent_harness.implement.executor import Budgets
from agent_harness.implement.plan_answer import (
    PlanAnswerInvalid,
    parse_plan_answer,
    read_check,
    read_steps,
)
from agent_harness.implement.steps import (
    Check,
    PlanFileUnreadable,
    Step,
    StepPlan,
    StepStatus,
    load_plan,
    save_plan,
)
from agent_harness.implement.verifier import verify


def steps_of(n: int) -> list[dict[str, object]]:
    return [
        {"id": str(i), "description": f"step {i}", "check": {"kind": "file_exists", "path": "a"}}
        for i in range(1, n + 1)
    ]


@pytest.mark.unit
@pytest.mark.parametrize(
    "answer",
    [
        '{"steps": [{"id": 1, "description": "d", "check": "$ true"}]}',
        'Plan below:\n```json\n{"steps": [{"id": 1, "description": "d", "check": "$ true"}]}\n```',
        'I think {this} works. [{"id": 1, "description": "d", "check": "$ true"}] Done.',
        '{"plan": {"steps": [{"id": 1, "description": "d", "check": "$ true"}]}}',
    ],
)
def test_a_plan_is_found_bare_fenced_or_amid_prose(answer: str) -> None:
    [raw] = parse_plan_answer(answer)
    assert raw["description"] == "d"


@pytest.mark.unit
@pytest.mark.parametrize("answer", ["", "no plan here", '{"steps": []}', '{"steps": "three"}'])
def test_an_answer_without_steps_is_refused(answer: str) -> None:
    with pytest.raises(PlanAnswerInvalid):
        parse_plan_answer(answer)


@pytest.mark.unit
def test_check_forms_are_read_and_prose_is_not(tmp_path: Path) -> None:
    assert read_check("$ pytest -q", tmp_path, False) == Check(kind="command", command="pytest -q")
    assert read_check({"path": "a.txt"}, tmp_path, False) == Check(kind="file_exists", path="a.txt")
    assert read_check({"path": "a", "pattern": "x+"}, tmp_path, False) == Check(
        kind="regex", path="a", pattern="x+"
    )
    assert read_check({"kind": "item_checks"}, tmp_path, True) == Check(kind="item_checks")
    assert "prose" in str(read_check("tests should pass", tmp_path, False))
    assert "no success check" in str(read_check(None, tmp_path, False))
    assert "no check commands" in str(read_check({"kind": "item_checks"}, tmp_path, False))
    assert "does not compile" in str(read_check({"path": "a", "pattern": "("}, tmp_path, False))
    assert "outside" in str(read_check({"path": "../../etc/passwd"}, tmp_path, False))
    assert "absolute" in str(read_check({"path": "/etc/passwd"}, tmp_path, False))
    assert "unknown kind" in str(read_check({"kind": "vibes"}, tmp_path, False))


@pytest.mark.unit
def test_steps_are_numbered_and_depend_on_the_previous_one_by_default(tmp_path: Path) -> None:
    raw = steps_of(3)
    raw[2]["depends_on"] = []
    steps = read_steps(raw, tmp_path, first_number=4, min_steps=3)
    assert [(s.id, s.depends_on) for s in steps] == [("4", []), ("5", ["4"]), ("6", [])]


@pytest.mark.unit
def test_every_problem_of_a_plan_is_reported_at_once(tmp_path: Path) -> None:
    raw = steps_of(8)
    raw[1]["depends_on"] = ["7"]
    raw[2]["depends_on"] = ["nope"]
    raw[3]["description"] = ""
    with pytest.raises(PlanAnswerInvalid) as caught:
        read_steps(raw, tmp_path, min_steps=3, max_steps=7)
    assert caught.value.reasons == (
        "the plan has 8 steps; write 3 to 7",
        "step 2 depends on '7', which is not before it",
        "step 3 depends on unknown step 'nope'",
        "step 4 has no description",
    )


@pytest.mark.unit
def test_a_replan_may_depend_on_steps_already_done(tmp_path: Path) -> None:
    raw = steps_of(1)
    raw[0]["depends_on"] = ["2"]
    [new] = read_steps(raw, tmp_path, kept_ids=["2"], first_number=5, min_steps=1)
    assert (new.id, new.depends_on) == ("5", ["2"])


@pytest.mark.unit
def test_dependents_are_found_through_other_steps() -> None:
    check = Check(kind="file_exists", path="a")
    plan = StepPlan(
        goal="g",
        steps=[
            Step(id="1", description="a", success_check=check),
            Step(id="2", description="b", success_check=check, depends_on=["1"]),
            Step(id="3", description="c", success_check=check, depends_on=["2"]),
            Step(id="4", description="d", success_check=check),
        ],
    )
    assert [s.id for s in plan.dependents_of("1")] == ["2", "3"]
    assert plan.dependents_of("4") == []


@pytest.mark.integration
def test_the_verifier_decides_from_the_worktree(tmp_path: Path) -> None:
    (tmp_path / "a.txt").write_text("alpha\nbeta\n")
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin")}
    assert verify(Check(kind="file_exists", path="a.txt"), tmp_path).passed
    assert not verify(Check(kind="file_exists", path="b.txt"), tmp_path).passed
    assert verify(Check(kind="regex", path="a.txt", pattern="^beta$"), tmp_path).passed
    assert not verify(Check(kind="regex", path="b.txt", pattern="x"), tmp_path).passed
    failed = verify(Check(kind="command", command="echo nope; exit 3"), tmp_path, env=env)
    assert (failed.passed, failed.permanent) == (False, False)
    assert "exited 3" in failed.reason and "nope" in failed.reason
    missing = verify(Check(kind="command", command="no-such-command-xyz"), tmp_path, env=env)
    assert (missing.passed, missing.permanent) == (False, True)
    checks = ["test -f a.txt", "grep -q gamma a.txt"]
    gated = verify(Check(kind="item_checks"), tmp_path, item_checks=checks, env=env)
    assert not gated.passed and "grep -q gamma" in gated.reason


@pytest.mark.integration
def test_a_check_that_hangs_is_killed_at_its_timeout(tmp_path: Path) -> None:
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin")}
    # The grandchild sleep must die with the shell, or the pipe would hold the verifier open.
    verdict = verify(
        Check(kind="command", command="sleep 30 & sleep 30"), tmp_path, env=env, timeout_s=0.2
    )
    assert not verdict.passed and "did not finish in 0.2s" in verdict.reason


@pytest.mark.unit
def test_the_plan_file_round_trips_and_a_broken_one_is_named(tmp_path: Path) -> None:
    path = tmp_path / "state" / "plan.json"
    plan = StepPlan(
        goal="g",
        steps=[Step(id="1", description="a", success_check=Check(kind="command", command="true"))],
    )
    plan.steps[0].status = StepStatus.DONE
    save_plan(plan, path)
    assert load_plan(path) == plan
    assert [p.name for p in path.parent.iterdir()] == ["plan.json"]  # no temp file left behind
    path.write_text("{not json")
    with pytest.raises(PlanFileUnreadable, match="cannot read the step plan"):
        load_plan(path)


@pytest.mark.unit
@pytest.mark.parametrize(
    "bad", [{"max_attempts": 0}, {"max_replans": -1}, {"min_steps": 5, "max_steps": 4}]
)
def test_a_budget_that_cannot_work_is_refused_up_front(bad: dict[str, int]) -> None:
    with pytest.raises(ConfigError, match="executor budget"):
        Budgets(**bad)
