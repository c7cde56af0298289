"""The planner's two questions, asked through the model client's `planner` role.

`scope` turns the paragraph (and, on a revision, the person's feedback) into a scope with graded
questions; `tasks` turns the approved scope and the answers into ordered tasks. Each answer is
JSON checked against `model.ScopeAnswer` / `model.TasksAnswer`; one that does not fit is asked
for once more with what was wrong, and a second misfit raises `PlannerAnswerInvalid`. Provider
failures (rate limits, caps, parking) are the client's: they arrive here as its exceptions.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Generic, TypeVar

from pydantic import BaseModel, ValidationError

from agent_harness.config import DEFAULT_PROTECTED
from agent_harness.errors import UNREADABLE_JSON, read_json
from agent_harness.inception.model import (
    PlannerAnswerInvalid,
    PlannerOverBudget,
    Question,
    Scope,
    ScopeAnswer,
    TasksAnswer,
    fit_error,
)

if TYPE_CHECKING:
    from agent_harness.models.client import ModelClient

AnswerT = TypeVar("AnswerT", bound=BaseModel)

SCOPE_FORMAT = "inception.scope/1"
TASKS_FORMAT = "inception.tasks/1"

SYSTEM = (
    "You are the planner of agent-harness. A person describes work in a paragraph; you turn it "
    "into a scope, questions and then a plan that coding agents execute item by item. You do "
    "not write code. You answer with exactly one JSON object, nothing before or after it."
)

SCOPE_SHAPE = """{
  "objective": "the goal in one or two sentences",
  "goals": ["what the work delivers", "..."],
  "non_goals": ["what it deliberately leaves out"],
  "risks": ["what could go wrong"],
  "files": {"change": ["paths or globs expected to change"],
            "protect": ["paths or globs no change may touch"]},
  "questions": [{"id": "Q1", "text": "a question whose answer changes the plan",
                 "grade": "BLOCKING | IMPORTANT | NICE",
                 "default": "the answer you propose", "why": "what depends on it"}]
}"""

TASKS_SHAPE = """{
  "milestone": "a short name for this body of work",
  "items": [{"id": "T1", "title": "plain words, one line",
             "description": "what to change and how, for a coding agent",
             "depends_on": ["ids of earlier items"],
             "files": ["the only paths (globs) this item may change"],
             "labels": ["feature"],
             "check": "`a shell command that exits 0 only when the item is done`"}],
  "verification": ["`commands that verify the whole plan`"],
  "rollback": ["when to abort, and how to undo"]
}"""

SCOPE_RULES = """Rules:
- Grade each question: BLOCKING (the plan cannot be written without it), IMPORTANT (the plan
  changes with it; your default is a reasonable guess), NICE (a detail).
- Keep the id of every question you ask again, and a question the person has settled word
  for word: asked in other words, it is a new question and is asked again. Never drop or
  downgrade a BLOCKING question that has no answer: only the person may re-grade it.
- Paths are relative to the repository root: no spaces, commas or backticks."""

TASKS_RULES = """Rules:
- Items are ordered; depends_on names only other items, and there is no cycle.
- Every item lists its files; none of them may match a protected path.
- The check is one shell command in backticks that exits 0 only when the item is done; write
  prose only if no command can observe it (such a check is flagged).
- One line per text field; titles are plain words."""


# How the vendors say an answer stopped at max_tokens: OpenAI's finish_reason, Anthropic's
# stop_reason.
CUT_OFF = frozenset({"length", "max_tokens"})


@dataclass(frozen=True)
class Reply(Generic[AnswerT]):
    """A planner answer that fits, with what it took to get it."""

    answer: AnswerT
    calls: int
    tokens_in: int | None
    tokens_out: int | None


def context_block(context: dict[str, Any]) -> str:
    return "Context:\n```json\n" + json.dumps(context, ensure_ascii=False) + "\n```\n"


class Planner:
    """Asks the `planner` role; retries a misfit once with the validation error."""

    def __init__(
        self,
        client: ModelClient,
        *,
        worker: str = "inception",
        role: str = "planner",
        max_tokens: int = 4096,
        timeout_s: float = 300.0,
        protected: Sequence[str] = DEFAULT_PROTECTED,
        budget: Callable[[], tuple[float, float | None] | None] = lambda: None,
    ) -> None:
        self._client = client
        # The session's limit and what it has spent (None: not known), or None for no limit.
        self._budget = budget
        # The run's protected paths (the settings' `protected_paths`): an item that must
        # change one would be refused at its first attempt, after the plan was paid for.
        self._protected = tuple(protected)
        self._worker = worker
        self._role = role
        self._max_tokens = max_tokens
        self._timeout_s = timeout_s

    def scope(
        self,
        paragraph: str,
        previous: Scope | None = None,
        questions: Sequence[Question] = (),
        feedback: str | None = None,
    ) -> Reply[ScopeAnswer]:
        context: dict[str, Any] = {"paragraph": paragraph}
        if previous is not None:
            context["previous_scope"] = previous.model_dump(mode="json")
            context["questions"] = [q.model_dump(mode="json") for q in questions]
            context["feedback"] = feedback or ""
        task = (
            "Revise the previous scope with the person's feedback."
            if previous is not None
            else "Propose a scope for the paragraph, and the questions you need answered."
        )
        prompt = (
            f"Answer format: {SCOPE_FORMAT}\n\n{task}\n\n{context_block(context)}\n"
            f"Answer with this JSON shape:\n{SCOPE_SHAPE}\n\n{SCOPE_RULES}\n"
        )
        return self._ask("scope", prompt, ScopeAnswer, lambda answer: answer.problems())

    def tasks(
        self, paragraph: str, scope: Scope, questions: Sequence[Question]
    ) -> Reply[TasksAnswer]:
        decisions = [
            {
                "id": q.id,
                "question": q.text,
                "grade": q.grade,
                "answer": q.answer if q.state == "answered" else q.default,
                "assumed": q.state != "answered",
            }
            for q in questions
        ]
        context = {
            "paragraph": paragraph,
            "scope": scope.model_dump(mode="json"),
            "decisions": decisions,
        }
        prompt = (
            f"Answer format: {TASKS_FORMAT}\n\nThe scope below is approved. Break it into "
            f"ordered tasks.\n\n{context_block(context)}\n"
            f"Answer with this JSON shape:\n{TASKS_SHAPE}\n\n{TASKS_RULES}\n"
        )
        protect = (*scope.protect, *self._protected)
        return self._ask("plan", prompt, TasksAnswer, lambda a: a.problems(protect))

    def _ask(
        self,
        stage: str,
        prompt: str,
        shape: type[AnswerT],
        problems: Callable[[AnswerT], list[str]],
    ) -> Reply[AnswerT]:
        messages: list[dict[str, str]] = [{"role": "user", "content": prompt}]
        tokens_in: list[int | None] = []
        tokens_out: list[int | None] = []
        problem = ""
        for call in (1, 2):
            self._keep_within_budget(messages)
            done = self._client.complete(
                self._role,
                messages,
                worker=self._worker,
                system=SYSTEM,
                max_tokens=self._max_tokens,
                timeout=self._timeout_s,
            )
            tokens_in.append(done.tokens_in)
            tokens_out.append(done.tokens_out)
            answer, problem = read_answer(done.text, shape, problems)
            if answer is not None:
                return Reply(answer, call, _total(tokens_in), _total(tokens_out))
            if done.stop_reason in CUT_OFF:
                problem = (
                    f"the answer was cut off at the output limit ({self._max_tokens} tokens, "
                    f"stop reason {done.stop_reason}); answer more briefly: shorter texts, "
                    "fewer items"
                )
            messages += [
                {"role": "assistant", "content": done.text or "(empty)"},
                {
                    "role": "user",
                    "content": f"That answer does not fit {shape.__name__}: {problem}\n"
                    "Answer again with only the corrected JSON object.",
                },
            ]
        raise PlannerAnswerInvalid(stage, problem, 2)

    def _keep_within_budget(self, messages: Sequence[Mapping[str, str]]) -> None:
        budget = self._budget()
        if budget is None:
            return
        worst = self._client.worst_case_usd(
            self._role, messages, system=SYSTEM, max_tokens=self._max_tokens
        )
        _check_budget(budget, worst, self._role)


def _check_budget(
    budget: tuple[float, float | None] | None, worst: float | None, role: str
) -> None:
    """Check before paying: raise PlannerOverBudget when a call that may cost `worst` could
    take the session past its limit, or when what it costs is not known."""
    if budget is None:
        return
    limit, spent = budget
    key = "budgets.inception_cost_usd"
    if worst is None or spent is None:
        unknown = f"the {role}'s price" if worst is None else "an earlier planner call's cost"
        raise PlannerOverBudget(
            f"{unknown} is not known, so {key} (${limit:.4f}) cannot be kept; nothing was asked"
        )
    if spent + worst > limit + 1e-9:
        raise PlannerOverBudget(
            f"inception budget: ${spent:.4f} spent of ${limit:.4f}, and the next {role} call "
            f"may cost up to ${worst:.4f} ({key}); nothing was asked: raise it and resume"
        )


def read_answer(
    text: str, shape: type[AnswerT], problems: Callable[[AnswerT], list[str]]
) -> tuple[AnswerT | None, str]:
    """The answer in `text` when it fits `shape`; otherwise None and what is wrong, in a line."""
    data = _json_object(text)
    if isinstance(data, str):
        return None, data
    try:
        answer = shape.model_validate(data)
    except ValidationError as exc:
        return None, fit_error(exc)
    found = problems(answer)
    if found:
        return None, "; ".join(found[:6])
    return answer, ""


_FENCE = re.compile(r"```(?:json)?\s*\n(.*?)\n\s*```", re.DOTALL)


def _json_object(text: str) -> dict[str, Any] | str:
    """The JSON object an answer holds (bare, or in a ```json fence), or why there is none."""
    stripped = (text or "").strip()
    if not stripped:
        return "the answer is empty; expected one JSON object"
    fenced = _FENCE.search(stripped)
    candidate = fenced.group(1) if fenced else stripped
    start, end = candidate.find("{"), candidate.rfind("}")
    if start == -1 or end <= start:
        return "the answer holds no JSON object"
    try:
        data = read_json(candidate[start : end + 1])
    except UNREADABLE_JSON as exc:
        return f"the answer is not valid JSON ({exc})"
    if not isinstance(data, dict):
        return "the answer is JSON but not an object"
    return data


def _total(values: list[int | None]) -> int | None:
    known = [v for v in values if v is not None]
    return sum(known) if known else None
