"""`attach` on an agent whose session has no terminal left: its log, followed only while the
agent may still write to it."""

from __future__ import annotations

from pathlib import Path

import pytest

from agent_harness.sessions.attach import attach_target
from agent_harness.store.database import Store
from agent_harness.store.events import AgentFinished, AgentStarted

pytestmark = pytest.mark.integration

P = "me/app:PLAN"


def test_a_headless_log_is_followed_while_the_agent_runs_and_shown_once_it_ended(
    store: Store, tmp_path: Path
) -> None:
    log = tmp_path / "T1.log"
    log.write_text("working\n")
    started = AgentStarted(implementer="codex", session="ah-T1-1", attempt=1, host="headless",
                           log=str(log))  # fmt: skip
    store.append_event(P, "T1", started)
    running = attach_target(store, P, "T1")
    assert running.command[:4] == ["tail", "-n", "+1", "-f"]
    store.append_event(P, "T1", AgentFinished(ok=False, state="crashed"))
    # Before: `tail -f` on a log nobody writes to any more, which never returned.
    ended = attach_target(store, P, "T1")
    assert ended.command == ["cat", str(log)] and "has ended" in ended.note
    store.append_event(P, "T1", started.model_copy(update={"attempt": 2}))
    assert attach_target(store, P, "T1").command[0] == "tail"  # a new run: followed again


def test_an_ended_sessions_log_is_shown_without_the_wrappers_end_mark(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from agent_harness.cli import main
    from agent_harness.sessions.wrapper import END_MARK
    from agent_harness.store.database import open_store

    db = str(tmp_path / "harness.sqlite")
    store = open_store(db)

    log = tmp_path / "T1.log"
    log.write_bytes(b"wrote notes.md\r\ndone\r\n" + END_MARK)
    started = AgentStarted(implementer="codex", session="ah-T1-1", attempt=1, host="tmux",
                           log=str(log))  # fmt: skip
    store.append_event(P, "T1", started)
    store.append_event(P, "T1", AgentFinished(ok=True, state="done"))
    store.close()
    # Before: `cat` printed the mark, `]agent-harness;session-ended` in a pipe or a file.
    assert main(["attach", "T1", "--db", db, "--project", P]) == 0
    assert capsys.readouterr().out == "wrote notes.md\r\ndone\r\n"
