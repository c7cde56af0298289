"""Find where an item's agent is (or was) running, so a person can watch or answer it.

The run records each agent session's name, host and log in the item's events. A live tmux
session is attached read-write (a person can type an answer); an ended one, or one on the
headless host, is shown from its log.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from agent_harness.errors import HarnessError
from agent_harness.store.database import Store
from agent_harness.store.events import AgentFinished, AgentStarted, Event, last_of
from agent_harness.store.executor_events import ExecutorEvent


class NothingToAttach(HarnessError):
    """The item has no agent session on record."""


@dataclass(frozen=True)
class AttachTarget:
    command: list[str]  # empty: nothing to run (an implementer without a terminal)
    live: bool
    session: str
    note: str
    steps: tuple[str, ...] = ()  # the direct-API executor's step log, one line a step event
    ended_log: Path | None = None  # the log of a session that has ended, to be shown whole


def attach_target(
    store: Store,
    project: str,
    item_id: str,
    follow: bool = True,
    env: Mapping[str, str] | None = None,
    read_only: bool = False,
) -> AttachTarget:
    """How to watch the item's agent: its live session, or its log. `env` holds the remote
    session host's token (AGENT_HARNESS_SESSION_TOKEN) when the agent ran on one. With
    `read_only`, a live tmux session is attached so that no key typed reaches the agent."""
    events = store.all_events(project=project, item=item_id)
    started = last_of(events, AgentStarted)
    if not events:
        from agent_harness.queue.items import UnknownItem

        raise UnknownItem(project, item_id)  # as `work show` says it, and with its exit code
    if started is None:
        raise NothingToAttach(f"{item_id} has no agent session on record in {project}")
    session = started.session
    if started.host is None and started.implementer.startswith("executor"):
        # The direct-API executor edits the worktree through model calls: no terminal.
        steps = tuple(
            event.payload.describe()
            for event in events
            if isinstance(event.payload, ExecutorEvent) and event.written_by_harness
        )
        note = (
            f"{item_id} is worked by the direct-API executor ({started.implementer}): it has no "
            f"terminal to attach to; its steps ({len(steps)} events):"
        )
        return AttachTarget([], False, session, note, steps)
    host_kind = started.host
    log = Path(started.log or "")
    if host_kind == "remote" and started.host_url:
        live = _remote_target(started.host_url, session, env or {})
        if live is not None:
            return live
    if host_kind == "tmux":
        from agent_harness.sessions.tmux import TmuxHost

        host = TmuxHost(socket_name="agent-harness")
        if host.exists(session) and host.status(session).alive:
            keys = (
                "read-only: no key you type reaches the agent"
                if read_only
                else "what you type reaches the agent, Ctrl-C too (--read-only to only watch)"
            )
            return AttachTarget(
                host.attach_command(session, read_only=read_only),
                True,
                session,
                f"the live session {session} ({keys}; detach with Ctrl-b d)",
            )
    if log.is_file():
        return _log_target(log, session, follow and not _finished(events))
    raise NothingToAttach(f"{item_id}: session {session} has ended and its log {log} is gone")


def _log_target(log: Path, session: str, follow: bool) -> AttachTarget:
    """The session's log: followed only while the agent may still write to it (on a finished
    session `tail -f` would wait for ever for lines that never come), else shown whole."""
    if follow:
        command = ["tail", "-n", "+1", "-f", str(log)]
        return AttachTarget(command, False, session, f"following its log: {log}")
    note = f"the session has ended; its log: {log}"
    return AttachTarget(["cat", str(log)], False, session, note, ended_log=log)


def _finished(events: list[Event]) -> bool:
    """Whether the item's latest agent run has an end on record."""
    last = None
    for event in events:
        if isinstance(event.payload, AgentStarted | AgentFinished) and event.written_by_harness:
            last = event.payload
    return isinstance(last, AgentFinished)


def _remote_target(url: str, session: str, env: Mapping[str, str]) -> AttachTarget | None:
    """The remote host's own attach command while the session lives there; None once it ended.
    A host that cannot be asked is an error, never taken for an ended session."""
    from agent_harness.sessions.default import remote_host

    host = remote_host(url, env)
    try:
        if not host.status(session).alive:
            return None
        command = host.attach_command(session)
    finally:
        host.close()
    note = f"the live session {session} on {url}; run the command there (or over ssh)"
    return AttachTarget(command, True, session, note)
