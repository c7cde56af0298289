"""Everything `agent-harness run` shows: the approval table, the live view, the summary."""

from __future__ import annotations

import functools
import signal
import sys
import threading
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click
from rich.markup import escape
from rich.table import Table

from agent_harness.cli.plan_view import TABLE_ROWS_MAX
from agent_harness.errors import UsageError
from agent_harness.pipeline.budgets import format_usd
from agent_harness.plan.model import shell_word

if TYPE_CHECKING:
    from rich.console import Console

    from agent_harness.pipeline.launch import RunRequest
    from agent_harness.pipeline.report import RunReport
    from agent_harness.pipeline.run import Pipeline
    from agent_harness.plan.model import WorkItem


def _request(options: dict[str, Any]) -> RunRequest:
    """What the flags ask for, as the library's RunRequest."""
    from agent_harness.pipeline.launch import RunRequest

    plans = [Path(path) for path in options["plan_paths"]]
    return RunRequest(
        repo=str(options["repo"] or ""),
        work=Path(options["work"]) if options["work"] else None,
        plan_path=plans[0] if plans else None,
        more_plans=plans[1:],
        max_workers=options["max_workers"],
        session_host=options["session_host"],
        checks=list(options["checks"]),
        agent=options["agent"],
        implementer=options["implementer"],
        reviewer=str(options["reviewer"]),
        workers=int(options["workers"]),
        plan_key=options["plan_key"],
        only=[part for value in options["only"] for part in str(value).split(",") if part],
        allow_same_vendor=bool(options["allow_same_vendor"]),
        forge=options["forge"],
        github_url=options["github_url"],
        db=options["db"],
        audit_db=options.get("audit_db"),
        model=options["model"],
        max_attempts=options["max_attempts"],
        agent_timeout_s=options["agent_timeout"],
        own_login=bool(options["own_login"]),
        wait_for_others=not options["no_wait"],
        host_id=options.get("host_id"),
        merge_when_green=bool(options["merge_when_green"]) or None,
        max_pr_rounds=options["max_pr_rounds"],
    )


def execute_run(
    options: dict[str, Any], out: Console, err: Console, print_json: Callable[[Any], None]
) -> int:
    # From the first moment: a `kill` while the plan syncs or the clone is checked ended the
    # run with 143, saying nothing.
    with _terminated_as_interrupted():
        return _execute_run(options, out, err, print_json)


def _execute_run(
    options: dict[str, Any], out: Console, err: Console, print_json: Callable[[Any], None]
) -> int:
    from agent_harness.cli.settings_opts import given_flags, load_cli_settings
    from agent_harness.pipeline.fleetrun import FleetRun
    from agent_harness.pipeline.launch import pipelines_for, refuse_other_forge, targets

    request = _request(options)
    ask = bool(options["approve"]) and not options["yes"]
    if ask and not sys.stdin.isatty():
        raise UsageError(
            "--approve asks at a terminal, and standard input is not one (a pipe or /dev/null); "
            "run it in a terminal, or pass --yes to run without asking"
        )
    flags = given_flags(click.get_current_context(), options)
    loaded = load_cli_settings(flags=flags)
    settings = loaded.settings
    as_json = bool(options["as_json"])
    observer = _observer(as_json, err)
    from agent_harness.cli.tracker_opts import open_tracker

    def tracker(repo: str) -> Any:
        return open_tracker(
            repo, request.forge, request.github_url, settings, False, need_history=True
        )

    if request.forge == "local":
        for target in targets(request, settings):
            refuse_other_forge(target.work, Path(settings.state_dir))
    with pipelines_for(
        request, settings, tracker, observer=observer, config_file=loaded.file
    ) as launched:
        built = launched.built
        for pipeline, _plan in built:
            pipeline.check_setup()  # refusals come before the live view draws anything
        pipelines = [pipeline for pipeline, _plan in built]
        # With --json, stdout carries only JSON: the table and the questions go to stderr.
        talk = err if as_json else out
        if ask and not approve(talk, pipelines, settings.protected_paths, to_err=as_json):
            talk.print("nothing was run")
            return 1
        watchers = [launched.roles.refresh]
        fleet = FleetRun(pipelines, global_limit=request.max_workers, watchers=watchers)
        fleet.on_locked = functools.partial(_say_left_asked, err, pipelines, fleet.host)
        if as_json:
            reports = fleet.run()
        else:
            with observer.display():
                reports = fleet.run()
            err.print()
    render_end(out, reports, request, Path(settings.state_dir), as_json)
    return run_exit_code(reports, {p.project: p.settings.only for p in pipelines})


def _observer(as_json: bool, err: Console) -> Any:
    """JSON lines on stdout, or the live table on stderr."""
    if as_json:
        from agent_harness.cli.live import JsonLines

        return JsonLines()
    from agent_harness.cli.live import LiveView

    return LiveView(err)


def _say_left_asked(err: Console, pipelines: list[Pipeline], host: str) -> None:
    """A pause (or a dropped drain) a run before this one left, said before the work starts;
    `host` is the one the fleet reports its pools under."""
    from agent_harness.queue import control

    for pipeline in pipelines:
        said = control.left_asked(pipeline.store, pipeline.project, host)
        if said:
            err.print(f"warning: {said}", markup=False, soft_wrap=True)


@contextmanager
def _terminated_as_interrupted() -> Iterator[None]:
    """A plain `kill` (systemd, docker and `timeout` stop a process so) ends the run as Ctrl-C
    does: leases and sessions kept, checks stopped, said in one line; by default it died on
    the spot, saying nothing. A SIGTERM ignored by whoever started us stays ignored. So does
    `kill -INT` of a run a script started in the background (such a shell starts its jobs
    with SIGINT ignored; the run then went on to the end, deaf to it). So does Ctrl-C on such
    a script, as on `forge serve`: the run stops cleanly (leases and sessions kept) rather
    than run on after the script that started it was stopped."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    before = {number: signal.getsignal(number) for number in (signal.SIGTERM, signal.SIGINT)}
    taken = [
        number
        for number, handler in before.items()
        if handler == signal.SIG_DFL or (number == signal.SIGINT and handler == signal.SIG_IGN)
    ]
    for number in taken:
        signal.signal(number, signal.default_int_handler)
    try:
        yield
    finally:
        for number in taken:
            signal.signal(number, before[number])


def run_exit_code(
    reports: list[RunReport], selected: Mapping[str, set[str] | None] | None = None
) -> int:
    """4 when an item failed or was skipped, or waits for a person to fix it (its issue could
    not be made); 75 (come back later) when none did but some wait for a time (a parked
    endpoint, a spent cap, a limit's reset), or when a spent run budget left items to do: a
    script tells "all done" from "stuck on billing" by it; 0 otherwise. Only the items a
    project's run was `selected` to work count (`--only`): another that failed in an earlier
    run says nothing of this one."""
    from agent_harness.queue.holds import HOLD_REASON, NO_ISSUE_REASON

    chosen = selected or {}
    items = []
    for report in reports:
        only = chosen.get(report.project)
        items += [item for item in report.items if only is None or item.id in only]
    if any(item.state in ("failed", "skipped") for item in items):
        return 4
    waiting = [i for i in items if i.state == "waiting" and i.reason != HOLD_REASON]
    if any(item.reason == NO_ISSUE_REASON for item in waiting):
        return 4
    # A spent run budget left work undone: that is no run that "ended well" either.
    unpaid = any(r.stopped_by_budget for r in reports) and any(
        item.state in ("pending", "waiting") for item in items
    )
    return 75 if waiting or unpaid else 0


def render_end(
    out: Console, reports: list[RunReport], request: RunRequest, state_dir: Path, as_json: bool
) -> None:
    """Each plan's report: a table (and the local forge's pages), or one JSON line."""
    if request.forge == "local":
        from agent_harness.forge.local import forge_dir, moved_link

        for item in [item for report in reports for item in report.items if item.pr_url]:
            item.pr_url = moved_link(item.pr_url or "", forge_dir(state_dir))
    if as_json:
        import json

        # One line, like the events before it: the output stays valid JSON Lines.
        finished = (
            reports[0].as_json()
            if len(reports) == 1
            else {"projects": [r.as_json() for r in reports]}
        )
        click.echo(json.dumps({"event": "run_finished", **finished}, default=str))
        return
    for report in reports:
        render_report(out, report)
        if request.forge == "local":
            repo = report.project.rsplit(":", 1)[0]
            render_local_pages(out, repo, state_dir, report, request.work)


def render_local_pages(
    out: Console, repo: str, state_dir: Path, report: RunReport, work: Path | None = None
) -> None:
    """Where the local forge's pull request links answer once this run has ended, and how to
    press "Merge" on one of them."""
    from agent_harness.forge.local import describe_repo

    if not any(item.pr_url for item in report.items):
        return  # no link to answer
    local = describe_repo(state_dir, repo)
    # Newest first: numbers only grow, so this run's pull requests come before an earlier
    # run's still open (`run --only T4` named T1's, from the run before).
    opened = sorted(
        (item.pr_number for item in report.items if item.state == "pr_open" and item.pr_number),
        reverse=True,
    )
    data = shell_word(str(local.data_dir))
    pages = f"agent-harness forge serve --data {data}"
    where = f" (then open {local.page_url})" if local.page_url else ""
    out.print(
        f"The links answer while the forge's pages are served: {pages}{where}",
        soft_wrap=True,
        markup=False,
    )
    if opened:
        # With --work, reconcile also removes the worktrees of what was merged.
        clone = f" --work {shell_word(str(work))}" if work is not None else ""
        out.print(
            f"Merge one by hand: agent-harness forge merge {repo} {opened[0]} --data {data}; then, "
            f"in your clone, git pull origin {local.default_branch}, and agent-harness reconcile "
            f"--repo {repo} --forge local{clone}",
            soft_wrap=True,
            markup=False,
        )


def approve(
    out: Console, pipelines: list[Pipeline], protected: list[str], to_err: bool = False
) -> bool:
    """Show what the run would work on and ask; a person may leave items out first. Whatever
    is left out is held back for this run only, like `--only`. With several plans an item is
    named `PLANKEY:ID`."""
    several = len(pipelines) > 1
    listed: dict[str, tuple[Pipeline, str]] = {}  # what a person types -> (its plan, its id)
    for pipeline in pipelines:
        will, wont = pipeline.to_approve()
        title = f"items that will run (plan {pipeline.plan_key})" if several else None
        render_approval(out, will, wont, protected, title=title)
        for item in will:
            listed[f"{pipeline.plan_key}:{item.id}" if several else item.id] = (pipeline, item.id)
    if not listed:
        return False
    left_out = _ask_left_out(out, listed, to_err)
    chosen = [name for name in listed if name not in left_out]
    if not chosen:
        return False
    question = f"Run {len(chosen)} of them ({', '.join(chosen)})?"
    if not click.confirm(question, default=False, err=to_err):
        return False
    for pipeline in pipelines:
        mine = [(name, item_id) for name, (owner, item_id) in listed.items() if owner is pipeline]
        if any(name in left_out for name, _id in mine):
            pipeline.settings.only = {item_id for name, item_id in mine if name not in left_out}
    return True


def _ask_left_out(out: Console, listed: dict[str, Any], to_err: bool) -> set[str]:
    """The listed items a person leaves out; asked again until every name is in the list."""
    first = next(iter(listed))
    example = f"{first.split(':')[0]}:T2" if ":" in first else "T2 T5"
    while True:
        answer = click.prompt(
            f"Leave any out? Type their ids (e.g. {example}), or press Enter to keep them all",
            default="",
            show_default=False,
            err=to_err,
        )
        left_out = {word for word in answer.replace(",", " ").split() if word}
        unknown = sorted(left_out - set(listed))
        if not unknown:
            return left_out
        out.print(f"not in the list: {', '.join(unknown)}", markup=False)


def render_approval(
    out: Console,
    will: list[WorkItem],
    wont: list[tuple[WorkItem, str]],
    protected: list[str],
    title: str | None = None,
) -> None:
    from agent_harness.git.protect import glob_matches

    table = Table(title=title or "items that will run", title_justify="left")
    for name in ("id", "title", "deps", "labels", "flags"):
        table.add_column(name, overflow="fold")
    for item in will:
        flags = []
        if any(label.lower() in ("risky", "danger", "security") for label in item.labels):
            flags.append("[red]risky label[/red]")
        if any(glob_matches(glob, path) for path in item.files for glob in protected):
            flags.append("[red]declares a protected path[/red]")
        if not item.success_check:
            flags.append("[yellow]no success check[/yellow]")
        table.add_row(
            item.id,
            escape(item.title),
            ", ".join(item.depends_on) or "-",
            ", ".join(item.labels) or "-",
            ", ".join(flags) or "-",
        )
    out.print(table)
    for item, state in wont:
        hint = f" (agent-harness work retry {item.id} to run it again)" if state == "failed" else ""
        out.print(f"not run: {item.id} is {state}{hint}", markup=False)
    if not will:
        out.print("no item of this plan would run", markup=False)


# What the report's other columns take at the least, beside a pull request's link.
_REPORT_COLUMNS_WIDTH = 60


def cost_said(known: float | None, unpriced: int) -> str:
    """What the run cost, as the audit says it: the known sum and, apart, how many agent runs
    and reviews are of unknown price (never counted as $0)."""
    runs = "1 agent run or review" if unpriced == 1 else f"{unpriced} agent runs or reviews"
    if known is None:
        return f"cost unknown: {runs} of unknown price" if unpriced else "no agent or review ran"
    return f"cost {format_usd(known)}" + (f" + {runs} of unknown price" if unpriced else "")


def _report_table(project: str, shown: list[Any], whole_links: bool) -> Table:
    table = Table(title=f"run of {project}", title_justify="left")
    for name in ("item", "state", "attempts", "pull request", "reason"):
        short = name in ("state", "attempts") or (name == "pull request" and whole_links)
        table.add_column(name, no_wrap=short, overflow="fold")
    for item in shown:
        colour = {
            "pr_open": "green",
            "merged": "green",
            "failed": "red",
            "skipped": "yellow",
            "waiting": "yellow",
        }.get(item.state, "white")
        link = item.pr_url if whole_links else (f"#{item.pr_number}" if item.pr_number else None)
        table.add_row(
            item.id,
            f"[{colour}]{item.state}[/{colour}]",
            str(item.attempts),
            link or "-",
            escape(item.reason or ""),
        )
    return table


_DRAWN_FIRST = {"failed": 0, "skipped": 0, "merged": 3, "closed": 3, "reverted": 1, "pending": 4}


def render_report(out: Console, report: RunReport) -> None:
    # A plan of thousands drew thousands of rows: at most TABLE_ROWS_MAX, what needs a person
    # first (failed, skipped), then what is under way or waits, then what was delivered, and
    # the pending last; within each, in the plan's order.
    shown = sorted(report.items, key=lambda item: _DRAWN_FIRST.get(item.state, 2))
    shown = shown[:TABLE_ROWS_MAX]
    # A link folded in two opens its first half: where the table cannot hold the links whole,
    # it names each pull request by number, and the links follow it, one to a line.
    longest = max((len(item.pr_url or "") for item in shown), default=0)
    whole = out.width >= longest + _REPORT_COLUMNS_WIDTH
    out.print(_report_table(report.project, shown, whole))
    for item in [] if whole else shown:
        if item.pr_url:
            out.print(f"{item.id}: {item.pr_url}", markup=False, soft_wrap=True)
    if len(report.items) > len(shown):
        drawn = {id(item) for item in shown}
        states: dict[str, int] = {}
        for item in report.items:
            if id(item) not in drawn:
                states[item.state] = states.get(item.state, 0) + 1
        counts = ", ".join(f"{n} {state}" for state, n in sorted(states.items()))
        rest = len(report.items) - len(shown)
        out.print(
            f"… and {rest} more items ({counts}; not drawn: `agent-harness work --json` lists "
            "every one)",
            markup=False,
        )
    cost = cost_said(report.cost_usd, report.unpriced)
    out.print(
        f"{report.events} events recorded; {cost}"
        + ("; stopped: drained (run again to carry on)" if report.drained else ""),
        markup=False,
    )
    if report.stopped_by_budget:
        out.print(f"stopped claiming: {report.stopped_because or 'run budget spent'}", markup=False)
    for warning in report.warnings:
        out.print(f"warning: {warning}", markup=False)
