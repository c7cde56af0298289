"""An inception session: a state machine whose every step is an event of `inception:<id>`.

    start(paragraph) -> started
    propose_scope() / propose_scope(feedback) -> scoped        (the planner; again to revise)
    answer / defer / regrade(question) -> scoped               (refused once approved)
    approve() -> approved                                      (refused while BLOCKING is open)
    plan() -> planned                                          (the planner; then PLAN.md)

The session is always read back from its events (`view`), so a process that died mid-way, or
another one, resumes where the log says. A planner answer that fails leaves no step behind,
only an `inception.planner_failed` event saying why. The planner may not downgrade or drop a
BLOCKING question that is unanswered: the question is kept BLOCKING, and the event says so.
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING

from agent_harness.errors import HarnessError, UsageError
from agent_harness.inception.model import (
    GRADES,
    BlockingOpen,
    Grade,
    Question,
    SessionView,
    StepRefused,
    UnknownSession,
)
from agent_harness.inception.render import render_plan
from agent_harness.store.events import Event, payload_of
from agent_harness.store.inception_events import (
    InceptionStarted,
    PlannerFailed,
    PlanWritten,
    QuestionSettled,
    ScopeApproved,
    ScopeProposed,
)

if TYPE_CHECKING:
    from agent_harness.inception.planner import Planner
    from agent_harness.models.routes import Route
    from agent_harness.store.database import Store
    from agent_harness.store.payload import Payload

PROJECT_PREFIX = "inception:"
MAX_PARAGRAPH = 20_000
# Revisions are bounded: if five rounds have not settled the scope, a sixth will not either.
MAX_ROUNDS = 5


class PlannerKeyMissing(UsageError):
    """The planner's API key is not in the environment (the API's 409: the server, not the
    request, lacks it)."""


def project_of(session_id: str) -> str:
    return PROJECT_PREFIX + session_id


def model_events(store: Store, session_id: str) -> Callable[[str, dict[str, object]], None]:
    """A model client's event sink that records its planner calls (tokens, latency, failure
    class) as events of the session, where audits and prices read them."""

    def sink(kind: str, payload: dict[str, object]) -> None:
        store.append_event(project_of(session_id), None, payload_of(kind, payload))

    return sink


def planner_route(spec: str, env: Mapping[str, str]) -> Route:
    """The planner's route from `vendor:model`; refused while its API key is not set, so a
    session is never started that could not be planned."""
    from agent_harness.models.routes import route_from_spec

    route = route_from_spec(spec, env)
    if not env.get(route.api_key_env):
        raise PlannerKeyMissing(f"planner {spec} needs its API key: set {route.api_key_env}")
    return route


def planner_for(
    store: Store,
    session_id: str,
    spec: str,
    env: Mapping[str, str],
    protected: Sequence[str] | None = None,
    limit_usd: float | None = None,
) -> Planner:
    """A planner over the model client, its calls recorded as events of the session; no item
    it plans may touch `protected` (the settings' protected paths; the defaults when None).
    With `limit_usd` (budgets.inception_cost_usd), no call is made whose worst case could take
    the session's spend past it."""
    from agent_harness.config import DEFAULT_PROTECTED
    from agent_harness.inception.planner import Planner
    from agent_harness.models.client import ModelClient

    route = planner_route(spec, env)
    client = ModelClient(
        {"planner": route}, env=env, parking=store, events=model_events(store, session_id)
    )

    def budget() -> tuple[float, float | None] | None:
        return None if limit_usd is None else (limit_usd, session_spent(store, session_id))

    protected = DEFAULT_PROTECTED if protected is None else protected
    return Planner(client, protected=protected, budget=budget)


def session_spent(store: Store, session_id: str) -> float | None:
    """What the session's planner calls cost by the price list, over every step and process
    (its `model.call` events); None when one's price is not known (never counted as 0)."""
    from agent_harness.audit.pricing import Usage, call_cost
    from agent_harness.store.events import ModelCall

    total = 0.0
    for event in store.all_events(project=project_of(session_id)):
        call = event.payload
        if not isinstance(call, ModelCall) or call.parked:
            continue  # a parked call made no request
        if call.failure is not None and call.tokens_in is None and call.tokens_out is None:
            continue  # refused with no answer (a 429, a 401): no tokens were billed
        usage = Usage(call.tokens_in, call.tokens_out, call.tokens_cached, call.tokens_cache_write)
        cost = call_cost(call.vendor, call.endpoint, call.model, usage, event.ts)
        if cost is None:  # never counted as 0
            return None
        total += cost
    return total


class InceptionSession:
    """One session over a store. `planner` is needed only by the steps that call it."""

    def __init__(self, store: Store, session_id: str, planner: Planner | None = None) -> None:
        self.store = store
        self.id = session_id
        self.planner = planner

    @classmethod
    def start(
        cls, store: Store, paragraph: str, planner_spec: str, planner: Planner | None = None
    ) -> InceptionSession:
        text = paragraph.strip()
        if not text:
            raise UsageError("the paragraph is empty: describe the work in a few sentences")
        if len(text) > MAX_PARAGRAPH:
            raise UsageError(f"the paragraph is over {MAX_PARAGRAPH} characters; shorten it")
        session = cls(store, uuid.uuid4().hex[:12], planner)
        session._record(InceptionStarted(paragraph=text, planner=planner_spec))
        return session

    @classmethod
    def resume(
        cls, store: Store, session_id: str, planner: Planner | None = None
    ) -> InceptionSession:
        session = cls(store, session_id, planner)
        session.view()  # an unknown id is refused now
        return session

    # -- reading -----------------------------------------------------------------------------

    def events(self) -> list[Event]:
        return self.store.all_events(project=project_of(self.id))

    def view(self) -> SessionView:
        """The session as its events say it is now."""
        return replay(self.id, self.events())

    # -- steps -------------------------------------------------------------------------------

    def propose_scope(self, feedback: str | None = None) -> SessionView:
        """Ask the planner for a scope (first time), or to revise it with `feedback`."""
        now = self.view()
        if now.status in ("approved", "planned"):
            raise StepRefused(f"session {self.id} is {now.status}: its scope can no longer change")
        feedback = (feedback or "").strip() or None
        if now.status == "scoped" and feedback is None:
            raise StepRefused("the scope is proposed; give feedback to revise it")
        if now.round >= MAX_ROUNDS:
            raise StepRefused(
                f"the scope has been proposed {now.round} times (at most {MAX_ROUNDS}); "
                "answer the questions and approve it, or start again with a clearer paragraph"
            )
        planner = self._planner()
        try:
            reply = planner.scope(now.paragraph, now.scope, now.questions, feedback)
        except HarnessError as exc:
            self._record(PlannerFailed(stage="scope", reason=exc.message))
            raise
        asked = reply.answer.questions_asked()
        questions, kept, reopened = merge_questions(now.questions, asked)
        self._record(
            ScopeProposed(
                round=now.round + 1,
                feedback=feedback,
                scope=reply.answer.scope(),
                questions=tuple(questions),
                kept_blocking=tuple(kept),
                reopened=tuple(reopened),
                calls=reply.calls,
                tokens_in=reply.tokens_in,
                tokens_out=reply.tokens_out,
            )
        )
        return self.view()

    def answer(self, question_id: str, text: str, *, by: str = "person") -> SessionView:
        self._question(question_id)  # an unknown question is said first, whatever the answer
        answer = " ".join(text.split())
        if not answer:
            raise UsageError(f"the answer to {question_id} is empty")
        return self._settle(
            QuestionSettled(question=question_id, action="answer", answer=answer, by=by)
        )

    def defer(self, question_id: str, *, by: str = "person") -> SessionView:
        question = self._question(question_id)
        if question.grade == "BLOCKING":
            raise StepRefused(
                f"{question_id} is BLOCKING: answer it, or re-grade it before deferring "
                "(a deferred BLOCKING question would still block approval)"
            )
        return self._settle(QuestionSettled(question=question_id, action="defer", by=by))

    def regrade(
        self, question_id: str, grade: str, *, by: str = "person", reason: str | None = None
    ) -> SessionView:
        question = self._question(question_id)  # an unknown question is said first
        wanted = grade.strip().upper()
        if not wanted:
            raise UsageError(f"no grade given for {question_id}: give one of {', '.join(GRADES)}")
        if wanted not in GRADES:
            raise UsageError(f"grade {grade!r} is not one of {', '.join(GRADES)}")
        new: Grade = GRADES[GRADES.index(wanted)]
        return self._settle(
            QuestionSettled(
                question=question_id,
                action="regrade",
                grade=new,
                was=question.grade,
                by=by,
                reason=reason,
            )
        )

    def approve(self, *, by: str = "person") -> SessionView:
        now = self.view()
        if now.status == "started":
            raise StepRefused("nothing to approve yet: propose a scope first")
        if now.status in ("approved", "planned"):
            raise StepRefused(f"session {self.id} is already {now.status}")
        if now.open_blocking:
            raise BlockingOpen(now.open_blocking)
        still_open = tuple(q.id for q in now.questions if q.state != "answered")
        self._record(ScopeApproved(by=by, still_open=still_open))
        return self.view()

    def plan(self) -> SessionView:
        """The approved scope as PLAN.md; asks the planner once per session (then reads it back)."""
        now = self.view()
        if now.status == "planned":
            return now
        if now.status != "approved":
            raise StepRefused(f"session {self.id} is {now.status}: approve the scope first")
        assert now.scope is not None
        planner = self._planner()
        try:
            reply = planner.tasks(now.paragraph, now.scope, now.questions)
            rendered = render_plan(self.id, now.scope, now.questions, reply.answer)
        except HarnessError as exc:
            self._record(PlannerFailed(stage="plan", reason=exc.message))
            raise
        self._record(
            PlanWritten(
                markdown=rendered.markdown,
                items=rendered.items,
                flagged=rendered.flagged,
                calls=reply.calls,
                tokens_in=reply.tokens_in,
                tokens_out=reply.tokens_out,
            )
        )
        return self.view()

    # -- internals ---------------------------------------------------------------------------

    def _planner(self) -> Planner:
        if self.planner is None:
            raise UsageError("this step asks the planner: give the session a planner route")
        return self.planner

    def _question(self, question_id: str) -> Question:
        now = self.view()
        if now.status in ("approved", "planned"):
            raise StepRefused(
                f"session {self.id} is {now.status}: its questions can no longer change"
            )
        return now.question(question_id)

    def _settle(self, payload: QuestionSettled) -> SessionView:
        self._record(payload)
        return self.view()

    def _record(self, payload: Payload) -> None:
        self.store.append_event(project_of(self.id), None, payload)


def merge_questions(
    before: tuple[Question, ...], asked: list[Question]
) -> tuple[list[Question], list[str], list[str]]:
    """The questions after a planner round: what the person settled stays settled, a grade the
    person set stays theirs, and an unanswered BLOCKING question is never downgraded or
    dropped by the planner (those are returned as kept). A settled question the planner asks
    in other words is another question: it is asked again, open, and returned as reopened
    (an answer to "Keep the old API?" is no answer to "Delete the users' data?")."""
    old = {q.id: q for q in before}
    kept: list[str] = []
    reopened: list[str] = []
    merged: list[Question] = []
    for new in asked:
        prior = old.pop(new.id, None)
        if prior is None:
            merged.append(new)
            continue
        state, answer = prior.state, prior.answer
        if state != "open" and _words(prior.text) != _words(new.text):
            state, answer = "open", None
            reopened.append(prior.id)
        grade, graded_by = new.grade, "planner"
        if prior.graded_by == "person":
            grade, graded_by = prior.grade, "person"
        elif prior.grade == "BLOCKING" and new.grade != "BLOCKING" and state != "answered":
            grade = "BLOCKING"
            kept.append(prior.id)
        merged.append(
            new.model_copy(
                update={"grade": grade, "graded_by": graded_by, "state": state, "answer": answer}
            )
        )
    for prior in old.values():
        if prior.state != "open":
            merged.append(prior)  # a decision taken is never dropped
        elif prior.grade == "BLOCKING":
            merged.append(prior)
            kept.append(prior.id)
    return merged, kept, reopened


def _words(text: str) -> str:
    """A question's words, as compared across rounds: case, spacing and a sentence's
    punctuation aside (`$5` and `€5`, `> 10` and `< 10` are other questions)."""
    return " ".join(re.sub(r"[.,;:!?'\"]", " ", text.casefold()).split())


def replay(session_id: str, events: list[Event]) -> SessionView:
    """Fold a session's events into its view; refuses an id with no `inception.started`."""
    started = next((e.payload for e in events if isinstance(e.payload, InceptionStarted)), None)
    if started is None:
        raise UnknownSession(session_id)
    view = SessionView(
        id=session_id, status="started", paragraph=started.paragraph, planner=started.planner
    )
    for event in events:
        view = _apply(view, event.payload)
    return view


def _apply(view: SessionView, payload: object) -> SessionView:
    if isinstance(payload, ScopeProposed):
        return view.model_copy(
            update={
                "status": "scoped",
                "round": payload.round,
                "scope": payload.scope,
                "questions": payload.questions,
                "kept_blocking": payload.kept_blocking,
                "reopened": payload.reopened,
            }
        )
    if isinstance(payload, QuestionSettled):
        questions = tuple(_settled(q, payload) for q in view.questions)
        return view.model_copy(update={"questions": questions})
    if isinstance(payload, ScopeApproved):
        return view.model_copy(update={"status": "approved"})
    if isinstance(payload, PlanWritten):
        return view.model_copy(
            update={
                "status": "planned",
                "plan": payload.markdown,
                "items": payload.items,
                "flagged": payload.flagged,
            }
        )
    return view


def _settled(question: Question, step: QuestionSettled) -> Question:
    if question.id != step.question:
        return question
    if step.action == "answer":
        return question.model_copy(update={"state": "answered", "answer": step.answer})
    if step.action == "defer":
        return question.model_copy(update={"state": "deferred", "answer": None})
    return question.model_copy(
        update={"grade": step.grade or question.grade, "graded_by": "person"}
    )
