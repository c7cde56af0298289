"""The pipeline the demo runs, put together from stand-ins that need no account.

The implementer is the example agent (a real program in examples/agent/) in terminal sessions;
the reviewer is a model route to the scripted model server, over OpenAI's wire format. Both see
the same environment, with this interpreter first on the PATH because the checks say `python`.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

from agent_harness.agents.presets import preset_for
from agent_harness.git.worktrees import WorkRepo
from agent_harness.implement.cli_agent import CliImplementer
from agent_harness.models.client import ModelClient
from agent_harness.models.routes import Route
from agent_harness.pipeline.launch import model_events
from agent_harness.pipeline.run import Pipeline
from agent_harness.pipeline.settings import Observer, RunSettings
from agent_harness.plan.model import Plan
from agent_harness.review.model import ModelReviewer
from agent_harness.secrets.process import process_env
from agent_harness.sessions.protocol import SessionHost
from agent_harness.store.database import Store
from agent_harness.tracker.protocol import Tracker

REVIEWER_KEY_ENV = "AGENT_HARNESS_DEMO_REVIEWER_KEY"


def demo_pipeline(
    *,
    plan: Plan,
    plan_key: str,
    tracker: Tracker,
    store: Store,
    host: SessionHost,
    workdir: Path,
    agent_command: str,
    reviewer_url: str,
    observer: Observer | None,
) -> Pipeline:
    """The pipeline for the clone in `workdir`/tally, keeping its state in `workdir`/state;
    `agent_command` is the implementer's command template (with `{prompt_file}`)."""
    state_dir = workdir / "state"
    env = _demo_environment()
    agent = preset_for(agent_command)
    route = Route("gpt-demo-reviewer", reviewer_url, "openai", "openai", REVIEWER_KEY_ENV)
    # Every reviewer call is an event, so the audit can price it (or say it cannot).
    events = model_events(store, f"{tracker.repo}:{plan_key}")
    client = ModelClient({"reviewer": route}, env=env, parking=store, events=events)
    return Pipeline(
        plan=plan,
        plan_key=plan_key,
        tracker=tracker,
        store=store,
        repo=WorkRepo(workdir / "tally", state_dir),
        implementer=CliImplementer(host, agent, env, timeout_s=60.0, idle_s=30.0, poll_s=0.05),
        reviewer=ModelReviewer(client, worker="demo"),
        settings=RunSettings(
            checks=["python -m unittest"],
            check_timeout_s=60.0,
            lease_s=60.0,
            workers=2,
            idle_poll_s=0.05,
        ),
        state_dir=state_dir,
        env=env,
        observer=observer,
    )


def _demo_environment() -> dict[str, str]:
    env = process_env()
    # The checks say `python`; make it this interpreter, whatever the machine calls it.
    env["PATH"] = os.pathsep.join([str(Path(sys.executable).parent), env.get("PATH", "")])
    # The scripted reviewer accepts any key, but a route must name one to send.
    env[REVIEWER_KEY_ENV] = "demo-key"
    return env
