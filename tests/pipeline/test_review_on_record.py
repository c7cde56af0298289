"""A model reviewer's calls are on the record of the item they were about, so a call answered
just before its run died is known to be answered: priced once, never counted again as a call
of unknown price. (A real model client against the scripted server, over loopback.)"""

from __future__ import annotations

from typing import Any

import pytest

from agent_harness.audit.cost import cost
from agent_harness.audit.database import open_audit
from agent_harness.audit.ingest import ingest_work_store
from agent_harness.models.client import ModelClient
from agent_harness.models.routes import Route
from agent_harness.pipeline.attempt import Attempt
from agent_harness.pipeline.launch import model_events
from agent_harness.queue import leases
from agent_harness.review.model import ModelReviewer
from agent_harness.testing.model_server import ModelServer
from agent_harness.testing.scripted_turns import ScriptedCompletion

from .conftest import Rig

pytestmark = pytest.mark.integration

PROJECT = "octo/app:PLAN"
APPROVED = '{"approved": true, "reasons": [], "permanent": false}'


class _Killed(BaseException):
    """The run's process dying: nothing after it is recorded."""


class _KilledOnceAnswered(ModelReviewer):
    """The first review's answer comes back (and is recorded); the run dies before its verdict
    is."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.asked = 0

    def ask(self, prompt: str, system: str) -> Any:
        self.asked += 1
        reply = super().ask(prompt, system)
        if self.asked == 1:
            raise _Killed
        return reply


def test_a_review_answered_just_before_its_run_died_is_priced_once_and_never_lost(
    rig: Rig,
) -> None:
    with ModelServer(api_key="k") as server:
        for _ in range(2):
            server.enqueue(ScriptedCompletion(text=APPROVED, input_tokens=900, output_tokens=40))
        route = Route("gpt-4o", f"{server.url}/v1", "openai", "openai", "KEY")
        client = ModelClient(
            {"reviewer": route},
            env={"KEY": "k"},
            parking=rig.store,
            events=model_events(rig.store, PROJECT),
            clock=rig.clock,
            sleep=rig.clock.sleep,
        )
        rig.reviewer = _KilledOnceAnswered(client, worker="run-1")  # type: ignore[assignment]
        plan, lease = rig.claim()
        with pytest.raises(_Killed):
            Attempt(rig.parts(), plan.item("T1"), lease).run()
        rig.clock.advance(61.0)  # its lease lapses; the next run takes the item over
        lease = leases.claim_next(rig.store, PROJECT, "w2", 60.0)
        assert lease is not None
        Attempt(rig.parts(), plan.item("T1"), lease).run()
    assert rig.state().state == "pr_open"
    kinds = [e.kind for e in rig.store.all_events(item="T1")]
    assert kinds.count("model.call") == 2  # each answer, on the item's own record
    assert "model.lost" not in kinds  # was: the first answer counted again, at no known price
    audit = open_audit(f"sqlite:///{rig.tmp / 'audit.sqlite'}", clock=rig.clock)
    ingest_work_store(rig.store, audit)
    [line] = [line for line in cost(audit).lines if line.role == "reviewer"]
    assert (line.calls, line.priced_calls, line.unknown_calls) == (2, 2, 0)  # was: 3, 2, 1
    assert line.cost_usd is not None and line.cost_usd > 0
    audit.close()
