"""What the planner must answer, and the PLAN.md made of it, read back by the plan parser."""

from __future__ import annotations

import json
from typing import Any

import pytest

from agent_harness.inception.model import Question, Scope, ScopeAnswer, TasksAnswer
from agent_harness.inception.planner import read_answer
from agent_harness.inception.render import UNOBSERVABLE, prose, render_plan
from agent_harness.inception.session import merge_questions
from agent_harness.plan.markdown import parse_plan

pytestmark = pytest.mark.unit

SCOPE = Scope(
    objective="Count words",
    goals=("count words",),
    change=("tally/words.py", "tests/test_words.py"),
    protect=("README.md", ".github/**"),
)


def tasks(**changes: Any) -> dict[str, Any]:
    answer: dict[str, Any] = {
        "milestone": "v0.1",
        "items": [
            {
                "id": "T1",
                "title": "Count words",
                "description": "Add word_count.",
                "files": ["tally/words.py"],
                "labels": ["feature"],
                "check": "`python -m unittest tests.test_words`",
            },
            {
                "id": "T2",
                "title": "Test words",
                "depends_on": ["T1"],
                "files": ["tests/test_words.py"],
                "check": "`python -m unittest`",
            },
        ],
        "verification": ["`python -m unittest`"],
        "rollback": ["revert the pull requests"],
    }
    answer.update(changes)
    return answer


def problems_of(answer: dict[str, Any], protect: tuple[str, ...] = SCOPE.protect) -> str:
    fitted, problem = read_answer(json.dumps(answer), TasksAnswer, lambda a: a.problems(protect))
    assert fitted is None
    return problem


def test_a_task_list_that_does_not_fit_is_named_in_one_line() -> None:
    items = tasks()["items"]
    cyclic = [{**items[0], "depends_on": ["T2"]}, items[1]]
    assert "dependency cycle T1 -> T2 -> T1" in problems_of(tasks(items=cyclic))
    unknown = [items[0], {**items[1], "depends_on": ["T7"]}]
    assert "items.T2.depends_on: 'T7' is not another item" in problems_of(tasks(items=unknown))
    protected = [{**items[0], "files": [".github/workflows/ci.yml"]}]
    assert "T1.files: .github/workflows/ci.yml is protected (.github/**)" in problems_of(
        tasks(items=protected)
    )
    lower = [{**items[0], "id": "t1"}]
    assert "'t1' is not an item id" in problems_of(tasks(items=lower))
    commas = [{**items[0], "files": ["a.py, b.py"]}]
    assert "items.0.files.0: 'a.py, b.py' is not a relative path" in problems_of(
        tasks(items=commas)
    )
    marker = [{**items[0], "title": "[P] Count words (depends on T0)"}]
    assert "a title is plain words" in problems_of(tasks(items=marker))
    assert "rollback: List should have at least 1 item" in problems_of(tasks(rollback=[]))


def test_a_scope_answer_may_sit_in_a_fence_among_words() -> None:
    scope = {
        "objective": "o",
        "goals": ["g"],
        "files": {"change": ["a.py"]},
        "questions": [{"id": "Q1", "text": "t?", "grade": "BLOCKING", "default": "no"}],
    }
    text = "Here you are:\n```json\n" + json.dumps(scope) + "\n```\nAnything else?"
    fitted, problem = read_answer(text, ScopeAnswer, lambda a: a.problems())
    assert problem == "" and fitted is not None and fitted.questions[0].grade == "BLOCKING"
    twice = {**scope, "questions": scope["questions"] * 2}
    _, problem = read_answer(json.dumps(twice), ScopeAnswer, lambda a: a.problems())
    assert problem == "questions: id Q1 is used twice"
    _, problem = read_answer(json.dumps({**scope, "questions": [{"id": "Q1"}]}), ScopeAnswer, list)
    assert problem.startswith("questions.0.text: Field required")


def question(qid: str, grade: str, **changes: Any) -> Question:
    return Question(id=qid, text=f"{qid}?", grade=grade, default="d", **changes)  # type: ignore[arg-type]


def test_the_planner_cannot_drop_or_downgrade_an_open_blocking_question() -> None:
    before = (
        question("Q1", "BLOCKING"),
        question("Q2", "BLOCKING"),
        question("Q3", "BLOCKING", state="answered", answer="yes"),
        question("Q4", "NICE"),
        question("Q5", "IMPORTANT", graded_by="person"),
    )
    asked = [question("Q1", "NICE"), question("Q3", "NICE"), question("Q5", "BLOCKING")]
    merged, kept, reopened = merge_questions(before, asked)
    grades = {q.id: (q.grade, q.state) for q in merged}
    assert grades == {
        "Q1": ("BLOCKING", "open"),  # downgrade refused
        "Q2": ("BLOCKING", "open"),  # drop refused
        "Q3": ("NICE", "answered"),  # answered: the planner may re-grade it
        "Q5": ("IMPORTANT", "open"),  # the person's grade stands
    }
    assert kept == ["Q1", "Q2"]  # Q4 (open, NICE, not asked again) is withdrawn
    assert reopened == []


def test_a_settled_question_asked_in_other_words_is_asked_again() -> None:
    # An answer to "Keep the old API?" is no answer to "Delete the users' data?": the planner
    # reusing an id does not carry the answer over, nor lower a BLOCKING grade.
    before = (
        question("Q1", "BLOCKING", state="answered", answer="yes"),
        question("Q2", "IMPORTANT", state="deferred"),
        question("Q3", "NICE", state="answered", answer="no"),
        Question(
            id="Q4",
            text="Keep the old API?",
            grade="NICE",
            default="d",
            state="answered",
            answer="yes",
        ),
    )
    asked = [
        Question(id="Q4", text="Keep the old API", grade="NICE", default="d"),  # punctuation
        Question(id="Q1", text="Delete all user data?", grade="NICE", default="no"),
        Question(id="Q2", text="Q2? ", grade="IMPORTANT", default="d"),  # same words
        Question(id="Q3", text="q3?", grade="NICE", default="d"),  # same words, other case
    ]
    merged, kept, reopened = merge_questions(before, asked)
    shown = {q.id: (q.grade, q.state, q.answer) for q in merged}
    assert shown == {
        "Q1": ("BLOCKING", "open", None),
        "Q2": ("IMPORTANT", "deferred", None),
        "Q3": ("NICE", "answered", "no"),
        "Q4": ("NICE", "answered", "yes"),
    }
    assert reopened == ["Q1"] and kept == ["Q1"]


HOSTILE = [
    "# a heading in the middle",
    "check: `rm -rf /` would be read as a field",
    "- [ ] T9 a checkbox that is not an item",
    "| id | title |",
    "Milestone: sneaky",
    "```",
    "depends on: T1",
    "<div>html</div>",
    "1. a numbered list",
]


@pytest.mark.parametrize("text", HOSTILE)
def test_planner_text_cannot_change_how_the_plan_reads(text: str) -> None:
    scope = SCOPE.model_copy(update={"objective": text, "goals": (text,), "risks": (text,)})
    answer = TasksAnswer.model_validate(
        tasks(
            verification=[text],
            rollback=[text],
            items=[{**tasks()["items"][0], "description": text}],
        )
    )
    asked = (question("Q1", "BLOCKING", state="answered", answer=text),)
    rendered = render_plan("s1", scope, asked, answer)
    plan = parse_plan(rendered.markdown)
    assert plan.unread == () and [i.id for i in plan.items] == ["T1"]
    assert plan.items[0].files == ("tally/words.py",)


def test_a_check_no_command_observes_is_flagged_in_the_plan() -> None:
    items = tasks()["items"]
    vague = [items[0], {**items[1], "check": "the tests look thorough"}]
    rendered = render_plan("s1", SCOPE, (), TasksAnswer.model_validate(tasks(items=vague)))
    assert rendered.flagged == (f"T2: {UNOBSERVABLE}",)
    t2 = parse_plan(rendered.markdown).item("T2")
    assert t2.success_check == "the tests look thorough" and "Flagged:" in t2.body


def test_items_are_written_with_dependencies_first() -> None:
    items = tasks()["items"]
    rendered = render_plan("s1", SCOPE, (), TasksAnswer.model_validate(tasks(items=items[::-1])))
    assert rendered.items == ("T1", "T2")
    markdown = rendered.markdown
    for heading in ("## Objective", "## Scope", "## Files", "## Milestone: v0.1"):
        assert heading in markdown
    assert markdown.index("## Milestone: v0.1") < markdown.index("### T1: Count words")
    assert markdown.index("## Verification") < markdown.index("## Rollback and abort")
    assert "Protected; no item may change them:\n\n- `README.md`\n- `.github/**`" in markdown


def test_prose_keeps_ordinary_text_as_written() -> None:
    assert prose("  Count   the\nwords  ") == "Count the words"
    assert prose("check: it") == "· check: it"
    assert prose("# not a heading") == "\\# not a heading"


def test_a_symbol_that_changes_a_questions_meaning_makes_it_another_question() -> None:
    before = (
        Question(
            id="Q1",
            text="Charge $5 per seat when limit > 10?",
            grade="IMPORTANT",
            default="no",
            state="answered",
            answer="yes",
        ),
    )
    asked = [
        Question(
            id="Q1", text="Charge €5 per seat when limit < 10?", grade="IMPORTANT", default="no"
        )
    ]
    merged, _kept, reopened = merge_questions(before, asked)
    assert reopened == ["Q1"] and merged[0].state == "open"
