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


class _KilledAt(ModelReviewer):
    """A reviewer whose run dies at its `ask`-th call: once that call's answer is back (and
    recorded), or while it waits for it (`before=True`)."""

    def __init__(self, client: ModelClient, ask: int, before: bool) -> None:
        super().__init__(client, worker="run-1")
        self.asked, self.dies_at, self.before = 0, ask, before

    def ask(self, prompt: str, system: str) -> Any:
        self.asked += 1
        if self.asked == self.dies_at and self.before:
            raise _Killed
        reply = super().ask(prompt, system)
        if self.asked == self.dies_at:
            raise _Killed
        return reply


def _died_in_review(rig: Rig, answers: list[str], ask: int, before: bool) -> list[Any]:
    """One attempt whose run dies in its review, then the next run's; the reviewer line of
    the audit afterwards."""
    with ModelServer(api_key="k") as server:
        for text in answers:
            server.enqueue(ScriptedCompletion(text=text, input_tokens=900, output_tokens=40))
        route = Route("gpt-4o", f"{server.url}/v1", "openai", "openai", "KEY")
        client = ModelClient(
            {"reviewer": route},
            env={"KEY": "k"},
            parking=rig.store,
            events=model_events(rig.store, PROJECT),
            clock=rig.clock,
            sleep=rig.clock.sleep,
        )
        rig.reviewer = _KilledAt(client, ask, before)  # type: ignore[assignment]
        plan, lease = rig.claim()
        with pytest.raises(_Killed):
            Attempt(rig.parts(), plan.item("T1"), lease).run()
        rig.clock.advance(61.0)  # its lease lapses; the next run takes the item over
        lease = leases.claim_next(rig.store, PROJECT, "w2", 60.0)
        assert lease is not None
        Attempt(rig.parts(), plan.item("T1"), lease).run()
    assert rig.state().state == "pr_open"
    audit = open_audit(f"sqlite:///{rig.tmp / 'audit.sqlite'}", clock=rig.clock)
    ingest_work_store(rig.store, audit)
    lines = [line for line in cost(audit).lines if line.role == "reviewer"]
    audit.close()
    return lines


def test_a_review_answered_just_before_its_run_died_is_priced_once_and_never_lost(
    rig: Rig,
) -> None:
    [line] = _died_in_review(rig, [APPROVED, APPROVED], ask=1, before=False)
    kinds = [e.kind for e in rig.store.all_events(item="T1")]
    assert kinds.count("model.call") == 2  # each answer, on the item's own record
    assert "model.lost" not in kinds  # was: the first answer counted again, at no known price
    assert (line.calls, line.priced_calls, line.unknown_calls) == (2, 2, 0)  # was: 3, 2, 1
    assert line.cost_usd is not None and line.cost_usd > 0


def test_a_second_ask_under_way_when_its_run_died_is_counted_lost_beside_the_first(
    rig: Rig,
) -> None:
    # The first answer holds no verdict, so the reviewer is asked again; the run dies while
    # that second (paid) call waits for its answer.
    answered, lost = _died_in_review(rig, ["Looks fine to me!", APPROVED], ask=2, before=True)
    kinds = [e.kind for e in rig.store.all_events(item="T1")]
    assert kinds.count("model.asked_again") == 1
    assert kinds.count("model.lost") == 1  # the second ask: paid or not, nobody knows
    # The first answer and the next run's are priced; the lost ask is of unknown price.
    assert (answered.calls, answered.priced_calls, answered.unknown_calls) == (2, 2, 0)
    assert (lost.label, lost.calls, lost.unknown_calls) == ("lost with its run", 1, 1)
