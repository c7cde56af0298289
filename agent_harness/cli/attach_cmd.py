"""`agent-harness attach ITEM`: watch (or answer) the agent working on an item."""

from __future__ import annotations

import os

import click

from agent_harness.cli.output import checked_name, from_env


@click.command(
    epilog="""\b
Examples:
  agent-harness attach T3                 # live tmux session, or the log if it has ended
  agent-harness attach T3 --print         # just print the command
  agent-harness attach T3 --read-only     # watch only: no key reaches the agent
  AGENT_HARNESS_SESSION_TOKEN=... agent-harness attach T3   # an agent on a remote host
"""
)
@click.argument("item_id", metavar="ITEM", callback=checked_name)
@click.option(
    "--project",
    metavar="OWNER/NAME:KEY",
    callback=checked_name,
    help="Project (needed when several).",
)
@click.option(
    "--db",
    metavar="URL",
    callback=from_env("AGENT_HARNESS_DB"),
    help="Database URL (env AGENT_HARNESS_DB).",
)
@click.option(
    "--print", "print_only", is_flag=True, help="Print the command instead of running it."
)
@click.option(
    "--read-only",
    is_flag=True,
    help="Only watch a live tmux session: no key you type (Ctrl-C neither) reaches the agent.",
)
def attach(
    item_id: str, project: str | None, db: str | None, print_only: bool, read_only: bool
) -> int:
    """Attach to the terminal where ITEM's agent runs, to watch it or answer its question.

    A live tmux session is attached read-write (what you type reaches the agent, Ctrl-C too;
    --read-only only watches); detach with Ctrl-b d and the agent carries on.
    When the session has ended (or agents run headless), its log is shown instead. An agent on
    a remote session host (`run --session-host`): the host is asked for its attach command,
    with the token in AGENT_HARNESS_SESSION_TOKEN.
    An item worked by the direct-API executor has no terminal: its step log is printed instead.
    """
    import shlex
    import sys

    from agent_harness.cli.output import open_database
    from agent_harness.errors import UsageError
    from agent_harness.queue.items import resolve_item_project
    from agent_harness.secrets.process import process_env
    from agent_harness.sessions.attach import attach_target

    store = open_database(db, must_exist=True)
    try:
        where = resolve_item_project(store, project, [item_id])
        target = attach_target(store, where, item_id, env=process_env(), read_only=read_only)
    finally:
        store.close()
    click.echo(target.note, err=True)
    if not target.command:
        for line in target.steps:
            click.echo(line)
        return 0
    if print_only:
        click.echo(shlex.join(target.command))
        return 0
    if target.ended_log is not None:
        from agent_harness.sessions.wrapper import read_log

        # Shown here rather than by `cat`: the log's end mark (a terminal code the session's
        # wrapper wrote after the agent) is left out, as every reader of a log does.
        click.echo(read_log(target.ended_log), nl=False)
        return 0
    if target.live and not sys.stdin.isatty():
        raise UsageError(
            "attaching to a live session needs a terminal: run this in one, or add --print "
            "for the command to run there"
        )
    os.execvp(target.command[0], target.command)
    return 0  # pragma: no cover - execvp does not return
