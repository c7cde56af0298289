"""The demo's plan made by inception: a paragraph, one BLOCKING question, an approval, PLAN.md.

The planner is the testing kit's scripted planner (`planner_rules`) behind a model route over
OpenAI's wire format, so the session goes through the real model client and records its calls;
the demo plays the person who answers the question it was refused approval for.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from agent_harness.inception.model import BlockingOpen
from agent_harness.inception.planner import Planner
from agent_harness.inception.session import InceptionSession, model_events
from agent_harness.models.client import ModelClient
from agent_harness.models.routes import Route
from agent_harness.store.database import Store
from agent_harness.testing.model_server import ModelServer, ScriptedResponder
from agent_harness.testing.planner_rules import inception_rules

PARAGRAPH = (
    "tally is a tiny Python library that counts words and lines in a text. "
    "Add word_count(text) in tally/words.py, tested by tests/test_words.py. "
    "Add line_count(text) in tally/lines.py, tested by tests/test_lines.py. "
    "Should a trailing newline start a new line? Leave README.md alone."
)
ANSWER = "No: a trailing newline ends the last line, so 'a\\nb\\n' has 2 lines"
PLANNER_KEY_ENV = "AGENT_HARNESS_DEMO_PLANNER_KEY"


@dataclass(frozen=True)
class InceptionDemo:
    """What the demo's inception did."""

    session: str
    plan_path: Path
    refused: str
    items: tuple[str, ...]


def plan_by_inception(
    workdir: Path, store: Store, step: Callable[[str], None] = lambda _message: None
) -> InceptionDemo:
    """Argue the demo paragraph into `workdir`/PLAN.md, recording the session in `store`."""
    with ModelServer([ScriptedResponder(inception_rules)]) as server:
        route = Route("gpt-demo-planner", f"{server.url}/v1", "openai", "openai", PLANNER_KEY_ENV)
        session = InceptionSession.start(store, PARAGRAPH, f"openai:{route.model}")
        client = ModelClient(
            {"planner": route},
            env={PLANNER_KEY_ENV: "demo-key"},
            parking=store,
            events=model_events(store, session.id),
        )
        session.planner = Planner(client)
        step(f"inception session {session.id}: the planner proposes a scope from a paragraph")
        view = session.propose_scope()
        blocking = [q.id for q in view.questions if q.grade == "BLOCKING"]
        step(f"{len(view.questions)} questions, BLOCKING: {', '.join(blocking) or 'none'}")
        try:
            session.approve()
            refused = ""
        except BlockingOpen as exc:
            refused = exc.message
            step(refused)
        for question_id in blocking:
            session.answer(question_id, ANSWER)
            step(f"answered {question_id} as a person would; approving")
        session.approve()
        view = session.plan()
        client.close()
    assert view.plan is not None
    target = workdir / "PLAN.md"
    target.write_text(view.plan, encoding="utf-8")
    step(f"wrote {target}: items {', '.join(view.items)}")
    return InceptionDemo(session.id, target, refused, view.items)
