"""What `agent-harness inception` shows and asks on a terminal: the scope, the questions in
grade order, the plan before it is written."""

from __future__ import annotations

from typing import TYPE_CHECKING

import click

if TYPE_CHECKING:
    from rich.console import Console

    from agent_harness.inception.model import Question, SessionView
    from agent_harness.inception.session import InceptionSession

GRADE_STYLE = {"BLOCKING": "bold red", "IMPORTANT": "yellow", "NICE": "dim"}


def show_scope(out: Console, view: SessionView) -> None:
    from rich.markup import escape

    scope = view.scope
    assert scope is not None
    out.print(f"[bold]Scope[/bold] (round {view.round})")
    out.print(f"  objective: {escape(scope.objective)}")
    for title, values in (
        ("goals", scope.goals),
        ("not in scope", scope.non_goals),
        ("risks", scope.risks),
        ("files to change", scope.change),
        ("protected", scope.protect),
    ):
        if values:
            out.print(f"  {title}:")
            for value in values:
                out.print(f"    - {escape(value)}")
    if view.kept_blocking:
        kept = ", ".join(view.kept_blocking)
        out.print(f"  [red]kept BLOCKING[/red] (the planner may not downgrade them): {kept}")
    if view.reopened:
        asked = ", ".join(view.reopened)
        out.print(f"  [yellow]asked again[/yellow] (reworded since they were settled): {asked}")
    out.print("[bold]Questions[/bold]")
    for question in view.in_grade_order():
        out.print("  " + describe(question))


def describe(question: Question) -> str:
    from rich.markup import escape

    style = GRADE_STYLE[question.grade]
    where = {
        "open": f"proposed: {escape(question.default)}",
        "answered": f"answered: {escape(question.answer or '')}",
        "deferred": f"deferred; assumed: {escape(question.default)}",
    }[question.state]
    return f"{question.id} [{style}]{question.grade}[/{style}] {escape(question.text)} — {where}"


def refine_scope(out: Console, session: InceptionSession) -> SessionView:
    """Revise the scope with feedback until the person presses Enter."""
    view = session.view()
    while True:
        feedback = click.prompt(
            "Feedback to revise the scope (Enter to keep it)",
            default="",
            show_default=False,
            err=True,
        ).strip()
        if not feedback:
            return view
        view = session.propose_scope(feedback)
        show_scope(out, view)


def ask_questions(out: Console, session: InceptionSession, view: SessionView) -> SessionView:
    """Ask each open question, most important first: Enter takes the proposed answer, `defer`
    defers, `grade NICE` re-grades (then asks again), anything else is the answer."""
    from rich.markup import escape

    from agent_harness.errors import HarnessError

    pending = [q.id for q in view.in_grade_order() if q.state == "open"]
    while pending:
        question = session.view().question(pending[0])
        out.print(describe(question))
        reply = click.prompt(
            "  answer (Enter: proposed; 'defer'; 'grade BLOCKING|IMPORTANT|NICE')",
            default="",
            show_default=False,
            err=True,
        ).strip()
        try:
            if reply.lower().startswith("grade "):
                session.regrade(question.id, reply.split(None, 1)[1])
                continue
            if reply.lower() == "defer":
                session.defer(question.id)
            else:
                session.answer(question.id, reply or question.default)
        except HarnessError as exc:
            out.print(f"  [red]{escape(exc.message)}[/red]")
            continue
        pending.pop(0)
    return session.view()


def show_plan(out: Console, view: SessionView, interactive: bool) -> None:
    from rich.markup import escape

    if interactive:
        out.print(escape(view.plan or ""))
    for flag in view.flagged:
        out.print(f"[yellow]flagged[/yellow] {escape(flag)}")
