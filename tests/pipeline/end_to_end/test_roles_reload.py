"""`[roles]` in agent-harness.toml, changed while `agent-harness run` runs: the next review goes
to the new route, the review in flight finishes on the old one, and the change is an event."""

from __future__ import annotations

import json
import shlex
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from agent_harness.cli import main
from agent_harness.demo.rules import review_rules
from agent_harness.store.database import open_store
from agent_harness.store.events import ModelCall, RolesChanged
from agent_harness.testing.forge import TOKEN
from agent_harness.testing.model_server import ModelServer, ScriptedResponder

from .conftest import EXAMPLES, REPO, Harness

pytestmark = pytest.mark.integration

PLAN = "### N1: Note one\n\n### N2: Note two\n\n"
AGENT = "import pathlib; pathlib.Path('note.txt').write_text('a note\\n')"


def test_a_changed_reviewer_route_takes_the_next_review_not_the_one_in_flight(
    harness: Harness, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:  # fmt: skip
    monkeypatch.chdir(tmp_path)
    for name, value in {
        "GH_TOKEN": TOKEN,
        "GITHUB_API_URL": harness.forge.server.api_url,
        "OPENAI_API_KEY": "sk-test",
        "OPENAI_BASE_URL": f"{harness.model.url}/v1",
        "AGENT_HARNESS_SESSIONS__HOST": "headless",
        "AGENT_HARNESS_TRACKER__WRITE_SPACING_S": "0",
    }.items():
        monkeypatch.setenv(name, value)
    (tmp_path / "PLAN.md").write_text(PLAN)
    (tmp_path / "agent.py").write_text(AGENT)
    config = tmp_path / "agent-harness.toml"
    config.write_text('[roles]\nreviewer = "openai:gpt-test"\n')
    changed = threading.Event()

    with ModelServer([ScriptedResponder(review_rules)]) as new:

        def old_reviewer(body: Any) -> Any:
            # The first review is held while the route changes under it, then answered here.
            if not changed.is_set():
                changed.set()
                config.write_text(
                    f'[roles.reviewer]\nvendor = "openai"\nmodel = "gpt-new"\n'
                    f'endpoint = "{new.url}/v1"\n'
                )
                deadline = time.monotonic() + 30
                while not roles_changed(tmp_path) and time.monotonic() < deadline:
                    time.sleep(0.05)
            return review_rules(body)

        harness.model.enqueue_first(ScriptedResponder(old_reviewer))
        agent = shlex.join([sys.executable, str(tmp_path / "agent.py")]) + " {prompt_file}"
        code = main(
            ["run", "--repo", REPO, "--work", str(harness.work), "--plan", "PLAN.md",
             "--agent", agent, "--reviewer", "openai:gpt-test", "--json"]
        )  # fmt: skip
        out = capsys.readouterr().out
        assert code == 0, out
        new_reviews = [r.body["model"] for r in new.requests]
        new_url = new.url
    old_reviews = [r.body["model"] for r in harness.reviews()]
    assert (old_reviews, new_reviews) == (["gpt-test"], ["gpt-new"])
    report = json.loads(out.strip().splitlines()[-1])
    assert [(i["id"], i["state"]) for i in report["items"]] == [
        ("N1", "pr_open"),
        ("N2", "pr_open"),
    ]
    [change] = roles_changed(tmp_path)
    assert change.roles == {"reviewer": f"openai:gpt-new at {new_url}/v1"}
    assert change.source == str(config)
    calls = model_calls(tmp_path)
    assert [(c.model, c.endpoint) for c in calls] == [
        ("gpt-test", f"{harness.model.url}/v1"),
        ("gpt-new", f"{new_url}/v1"),
    ]


def roles_changed(cwd: Path) -> list[RolesChanged]:
    return [e.payload for e in events(cwd) if isinstance(e.payload, RolesChanged)]


def model_calls(cwd: Path) -> list[ModelCall]:
    return [e.payload for e in events(cwd) if isinstance(e.payload, ModelCall)]


def events(cwd: Path) -> list[Any]:
    path = cwd / ".agent-harness" / "harness.sqlite"
    if not path.exists():
        return []
    with open_store(str(path)) as store:
        return store.all_events()


assert EXAMPLES.is_dir()
