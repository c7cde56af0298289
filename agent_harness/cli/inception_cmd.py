"""`agent-harness inception`: a paragraph argued into an approved scope, then PLAN.md."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import click

from agent_harness.cli.output import console, print_json

if TYPE_CHECKING:
    from rich.console import Console

    from agent_harness.inception.answers import PlannedAnswer
    from agent_harness.inception.model import SessionView
    from agent_harness.inception.planner import Planner
    from agent_harness.inception.session import InceptionSession
    from agent_harness.store.database import Store


@click.command(
    epilog="""\b
Examples:
  agent-harness inception "Add word_count(text) in tally/words.py, tested by
      tests/test_words.py." --planner openai:gpt-4.1
  agent-harness inception "..." --planner anthropic:claude-sonnet-4-5 --answers answers.json
  agent-harness inception "..." --planner openai:gpt-4.1 --accept-defaults --out PLAN.md
  agent-harness inception --resume 3f2a9c1d4e5b
\b
On a terminal it shows the scope, asks each question (most important first) and shows the
plan before writing it. Piped, or with --answers / --accept-defaults, it runs unattended and
exits 3, writing nothing, while a BLOCKING question has no answer. Answers file (JSON or
TOML): {"Q1": "an answer", "Q2": {"defer": true}, "Q3": {"grade": "NICE"}}.
"""
)
@click.argument("paragraph", required=False)
@click.option("--planner", "planner_spec", help="The planner's route, vendor:model.")
@click.option(
    "--answers",
    "answers_file",
    type=click.Path(path_type=Path, dir_okay=False),
    help="Answers by question id (JSON, or TOML by its .toml name).",
)
@click.option(
    "--accept-defaults", is_flag=True, help="Take the planner's proposed answer for the rest."
)
@click.option(
    "--out",
    type=click.Path(path_type=Path, dir_okay=False),
    default=Path("PLAN.md"),
    show_default=True,
    callback=lambda _ctx, _param, value: _checked_out(value),
    help="Where to write the plan.",
)
@click.option("--force", is_flag=True, help="Replace an existing --out file.")
@click.option("--resume", "resume_id", metavar="ID", help="Pick a session back up by its id.")
@click.option(
    "--ask/--no-ask", default=None, help="Ask on the terminal (default: when stdin is one)."
)
@click.option("--db", help="Database URL (default: the configured one).")
@click.option("--json", "as_json", is_flag=True, help="Print the session as JSON at the end.")
def inception(
    paragraph: str | None,
    planner_spec: str | None,
    answers_file: Path | None,
    accept_defaults: bool,
    out: Path,
    force: bool,
    resume_id: str | None,
    ask: bool | None,
    db: str | None,
    as_json: bool,
) -> int:
    """Turn a paragraph into a scope, graded questions, an approval and a PLAN.md.

    PARAGRAPH is the work in your words ('-' reads it from stdin). The planner proposes a
    scope (goals, non-goals, risks, files to change and to protect) and questions graded
    BLOCKING, IMPORTANT or NICE, each with a proposed answer. Approval is refused while a
    BLOCKING question is open; the approved scope becomes PLAN.md, which `agent-harness plan`
    reads with no unread line. Every step is recorded, so --resume ID goes on from where it
    stopped.
    """
    import os
    import sys

    from agent_harness.cli.output import open_database
    from agent_harness.errors import HarnessError, UsageError
    from agent_harness.inception.answers import read_answers

    unattended = answers_file is not None or accept_defaults
    interactive = (sys.stdin.isatty() and not unattended) if ask is None else ask
    if paragraph == "-":
        interactive = interactive and ask is True
    paragraph = _read_paragraph(paragraph)
    if os.path.lexists(out) and not force and not interactive:
        raise UsageError(f"{out} exists; pass --force to replace it, or --out another path")
    # Read before anything is recorded: a file that cannot be read leaves no session behind.
    planned = read_answers(answers_file) if answers_file is not None else None
    store = open_database(db, must_exist=resume_id is not None)
    try:
        session = _open_session(store, paragraph, planner_spec, resume_id)
        # With --json a script reads the outcome: the scope is not shown on stderr as well,
        # where the error (if any) is one JSON object.
        err = console(stderr=True)
        err.quiet = as_json and not interactive
        try:
            view = _drive(err, session, planned, answers_file, accept_defaults, interactive)
            _write(err, view, out, force, interactive)
        except HarnessError:
            if as_json:  # the session as it stands: its question ids, for an answers file
                print_json({**session.view().as_json(), "out": None})
            raise
    finally:
        store.close()
    if as_json:
        print_json({**view.as_json(), "out": str(out) if view.plan else None})
    return 0


def _checked_out(out: Path) -> Path:
    """The --out target, refused at once (before the planner is paid) when writing it could
    only go wrong: a name that is an option swallowed as its value (`--out --force`), a JSON
    name (`plan` would read the markdown as a JSON backlog), a folder under a file or where
    nothing may be written, or a device, pipe or socket that replacing by rename would
    destroy."""
    import os
    import stat

    from agent_harness.plan.model import shown_path

    shown = shown_path(str(out))
    if str(out).startswith("-"):
        raise click.BadParameter(
            f"{shown!r} looks like an option, not a file: give --out a file name "
            f"(./{shown} for a file so named)"
        )
    if out.suffix.lower() == ".json":
        raise click.BadParameter(
            f"{shown} names a JSON file, and the plan is markdown (`plan` would read it as a "
            "JSON backlog); give --out a .md name"
        )
    # What stands at the name first: `/dev/null` is no file to write, whoever may write in /dev.
    try:
        mode: int | None = os.stat(out).st_mode
    except OSError:
        mode = None  # nothing there yet (or unreadable: the write will say so)
    if mode is not None and not stat.S_ISREG(mode):
        raise click.BadParameter(f"{shown} is not a regular file; --out names a file to write")
    folder = _existing_folder(out.parent)
    if folder is not None and not os.access(folder, os.W_OK | os.X_OK):
        raise click.BadParameter(f"{shown_path(str(folder))} cannot be written to")
    return out


def _existing_folder(path: Path) -> Path | None:
    """The nearest folder at or above `path` that exists (the one a write would make the rest
    in); refused when a file stands there instead. None when none can be looked at."""
    import os

    from agent_harness.plan.model import shown_path

    for place in (path, *path.parents):
        if place == Path("") or os.path.isdir(place or "."):
            return place
        if os.path.lexists(place):
            raise click.BadParameter(
                f"{shown_path(str(place))} is not a folder, so --out cannot be written under it"
            )
    return None


def _read_paragraph(paragraph: str | None) -> str | None:
    """The paragraph, from stdin for '-'; refused unless it is text (a lone byte that is not
    UTF-8 would be kept in the session and then fail every request to the planner)."""
    import sys

    from agent_harness.errors import UsageError

    if paragraph == "-":
        raw = sys.stdin.buffer.read()
        try:
            return raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise UsageError(
                f"the paragraph on standard input is not UTF-8 text (byte {exc.start})"
            ) from None
    if paragraph is not None:
        try:
            paragraph.encode("utf-8")
        except UnicodeEncodeError as exc:
            raise UsageError(f"the paragraph is not UTF-8 text (character {exc.start})") from None
    return paragraph


def _open_session(
    store: Store, paragraph: str | None, planner_spec: str | None, resume_id: str | None
) -> InceptionSession:
    from agent_harness.errors import UsageError
    from agent_harness.inception.session import InceptionSession

    if resume_id and paragraph:
        raise UsageError("give a paragraph to start a session, or --resume ID, not both")
    if resume_id:
        session = InceptionSession.resume(store, resume_id)
        spec = planner_spec or session.view().planner
    else:
        if not paragraph or not paragraph.strip():
            raise UsageError(
                'describe the work: agent-harness inception "PARAGRAPH" --planner '
                "vendor:model (or --resume ID)"
            )
        if not planner_spec:
            raise UsageError("--planner vendor:model is required (e.g. openai:gpt-4.1)")
        spec = planner_spec
        _planner_route(spec)  # a bad route or a missing key is refused before anything is kept
        session = InceptionSession.start(store, paragraph, spec)
    session.planner = _planner(store, session.id, spec)
    return session


def _planner_route(spec: str) -> None:
    from agent_harness.inception.session import planner_route
    from agent_harness.secrets.process import process_env

    planner_route(spec, process_env())


def _planner(store: Store, session_id: str, spec: str) -> Planner:
    from agent_harness.config import load_settings
    from agent_harness.inception.session import planner_for
    from agent_harness.secrets.process import process_env

    settings = load_settings().settings
    protected = settings.protected_paths  # as the run will hold them
    limit = settings.budgets.inception_cost_usd
    return planner_for(store, session_id, spec, process_env(), protected, limit)


def _drive(
    err: Console,
    session: InceptionSession,
    planned: dict[str, PlannedAnswer] | None,
    answers_file: Path | None,
    accept_defaults: bool,
    interactive: bool,
) -> SessionView:
    """Take the session as far as it can go: scope, answers, approval, plan."""
    from agent_harness.cli.inception_view import ask_questions, refine_scope, show_scope
    from agent_harness.errors import HarnessError
    from agent_harness.inception.answers import accept_defaults as take_defaults
    from agent_harness.inception.answers import apply_answers

    view = session.view()
    err.print(f"[dim]inception session {session.id} (resume: --resume {session.id})[/dim]")
    try:
        if view.status == "started":
            view = session.propose_scope()
        if view.status == "scoped":
            show_scope(err, view)
            if interactive:
                view = ask_questions(err, session, refine_scope(err, session))
            if planned is not None:
                view = apply_answers(session, planned, by=f"answers file {answers_file}")
            if accept_defaults:
                view = take_defaults(session)
            view = _approve(session)
        if view.status == "approved":
            view = session.plan()
    except HarnessError as exc:
        err.print(f"[dim]session {session.id} kept; resume with --resume {session.id}[/dim]")
        raise exc
    return view


def _approve(session: InceptionSession) -> SessionView:
    from agent_harness.inception.model import BlockingOpen, StepRefused

    try:
        return session.approve()
    except BlockingOpen as exc:
        raise StepRefused(
            f"{exc.message}; no plan written. Answer them in --answers FILE, take the proposed "
            f"answers with --accept-defaults, or go on at a terminal: --resume {session.id}"
        ) from None


def _write(err: Console, view: SessionView, out: Path, force: bool, interactive: bool) -> None:
    import os

    from agent_harness.cli.inception_view import show_plan
    from agent_harness.errors import UsageError
    from agent_harness.plan.model import shell_word

    assert view.plan is not None
    show_plan(err, view, interactive)
    if interactive and not click.confirm(f"Write the plan to {out}?", default=True, err=True):
        err.print(f"not written; the plan is kept in session {view.id}")
        return
    there = os.path.lexists(out)  # a link to nothing is replaced only with --force too
    asked = interactive and there and not force
    if there and not force and not (asked and click.confirm(f"Replace {out}?", err=True)):
        raise UsageError(f"{out} exists; pass --force to replace it, or --out another path")
    out.parent.mkdir(parents=True, exist_ok=True)
    partial = out.with_name(f".{out.name}.partial")
    partial.write_text(view.plan, encoding="utf-8")
    partial.replace(out)
    count = f"{len(view.items)} item{'s' if len(view.items) != 1 else ''}"
    err.print(
        f"wrote {out}: {count} ({', '.join(view.items)}); "
        f"next: agent-harness plan {shell_word(str(out))}"
    )
