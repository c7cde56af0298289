"""`run --session-host URL` runs agents on a remote session host, and `attach` asks that host
for its attach command while the session lives (it used to say "the session has ended")."""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from agent_harness.cli import main
from agent_harness.demo.rules import review_rules
from agent_harness.errors import HarnessError
from agent_harness.sessions.default import SessionHostRefused, remote_host
from agent_harness.sessions.headless import HeadlessHost
from agent_harness.store.database import open_store
from agent_harness.store.events import AgentStarted, last_of
from agent_harness.testing.model_server import ModelServer, ScriptedResponder
from agent_harness.testing.session_server import running_session_server
from tests.shared.local_project import make_project, push_to_local_forge, wait_for

TOKEN = "remote-host-token-for-this-test"


@pytest.mark.acceptance
def test_an_agent_on_a_remote_host_is_attached_through_that_host(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    home, gates = tmp_path, tmp_path / "gates"
    agent = make_project(home, "### P1: Note one\n\n")
    monkeypatch.chdir(home)
    monkeypatch.setenv("AGENT_HARNESS_SESSION_TOKEN", TOKEN)
    remote = HeadlessHost(tmp_path / "remote-machine")
    with (
        ModelServer([ScriptedResponder(review_rules)]) as reviewer,
        running_session_server(remote, TOKEN) as server,
    ):
        env = {
            **{k: v for k, v in os.environ.items() if not k.startswith("AGENT_HARNESS_")},
            "OPENAI_BASE_URL": f"{reviewer.url}/v1",
            "OPENAI_API_KEY": "sk-local",
            "AGENT_HARNESS_SESSION_TOKEN": TOKEN,
            "AGENT_HARNESS_TRACKER__WRITE_SPACING_S": "0",
        }

        def cli(*args: str, stderr: bool = False) -> str:
            code = main(list(args))  # `attach` and `plan` in this process; the run is apart
            said = capsys.readouterr()
            assert code == 0, said.out + said.err
            return said.out + (said.err if stderr else "")

        push_to_local_forge(home, cli)
        run = subprocess.Popen(
            [sys.executable, "-m", "agent_harness", "run", "--repo", "me/app", "--forge", "local",
             "--work", "app", "--plan", "PLAN.md", "--agent", agent,
             "--reviewer", "openai:gpt-test", "--session-host", server.url, "--json"],
            cwd=home, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        )  # fmt: skip
        try:
            wait_for("P1 started", (gates / "P1.started").exists, run)
            with open_store(str(home / ".agent-harness" / "harness.sqlite")) as store:
                started = last_of(store.all_events(), AgentStarted)
            assert started is not None
            assert (started.host, started.host_url) == ("remote", server.url)
            session = started.session
            assert remote.status(session).alive  # the agent runs on the remote host
            said = cli("attach", "P1", "--print", stderr=True)
            command = said.splitlines()
            assert f"the live session {session} on {server.url}" in said
            assert shlex.join(remote.attach_command(session)) in command
            (gates / "P1.go").write_text("")
            out, err = run.communicate(timeout=60)
        finally:
            if run.poll() is None:
                run.kill()
                run.communicate()
    assert run.returncode == 0, err
    report = json.loads(out.strip().splitlines()[-1])
    assert [(i["id"], i["state"]) for i in report["items"]] == [("P1", "pr_open")]


@pytest.mark.integration
def test_a_session_host_that_does_not_answer_is_refused_before_any_work(
    tmp_path: Path,
) -> None:
    with running_session_server(HeadlessHost(tmp_path), TOKEN) as server:
        with pytest.raises(HarnessError, match="needs the host's bearer token"):
            remote_host(server.url, {})
        with pytest.raises(SessionHostRefused, match=r"does not answer as one: .*401: a valid"):
            remote_host(server.url, {"AGENT_HARNESS_SESSION_TOKEN": "wrong"})
        remote_host(server.url, {"AGENT_HARNESS_SESSION_TOKEN": TOKEN}).close()
    with pytest.raises(HarnessError, match="give the host's URL"):
        remote_host("host:8765", {"AGENT_HARNESS_SESSION_TOKEN": TOKEN})
