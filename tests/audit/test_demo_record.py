"""The demo, recorded: `audit cost --json` shows its scripted agent's runs and reviewer's calls
as unknown price with the reason (never $0), and deleting harness.sqlite changes no audited
answer."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from agent_harness.audit.baselines import baselines, record_baseline
from agent_harness.audit.cost import cost
from agent_harness.audit.database import open_audit
from agent_harness.audit.delivery import delivery
from agent_harness.audit.health import health
from agent_harness.audit.history import events
from agent_harness.audit.maintenance import maintain
from agent_harness.cli import main
from agent_harness.demo.run import examples_dir, run_demo
from agent_harness.store.database import Store

pytestmark = pytest.mark.acceptance

DAY = 86400.0


def _answers(audit: Store) -> dict[str, object]:
    return {
        "cost": cost(audit),
        "delivery": delivery(audit),
        "baselines": baselines(audit),
        "events": events(audit, limit=10_000),
        "health": health(audit, None).model_copy(update={"last_maintenance_at": None}),
    }


def test_the_demo_is_audited_and_outlives_its_work_database(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    plan = tmp_path / "PLAN.md"
    text = (examples_dir() / "PLAN.md").read_text()
    plan.write_text(text[: text.index("### T2")])  # T1 only: quicker
    report = run_demo(tmp_path / "demo", plan_path=plan)
    assert report.audit_db is not None and report.audit_problem is None
    audit_db = str(report.audit_db)

    assert main(["audit", "cost", "--audit-db", audit_db, "--json"]) == 0
    spent = json.loads(capsys.readouterr().out)
    reviewer = [line for line in spent["lines"] if line["role"] == "reviewer"]
    assert reviewer and all(line["cost_usd"] is None for line in reviewer)
    assert spent["cost_usd"] is None
    # The scripted agent reports no usage: its run is a call of unknown price, never $0.
    [agent] = [line for line in spent["lines"] if line["role"] == "implementer"]
    assert (agent["calls"], agent["unknown_calls"], agent["cost_usd"]) == (1, 1, None)
    assert spent["unknown_calls"] == report.reviews + 1 == 2
    unknown = {line["model"]: line["reason"] for line in spent["unknown"]}
    assert "Unable to find model" in unknown["gpt-demo-reviewer"]
    assert unknown[None] == "the agent reported neither its usage nor its cost"
    assert spent["summary"] == "$0.00 priced + 2 calls of unknown price"  # T1's run and review

    with open_audit(audit_db) as audit:
        record_baseline(audit, "1:1:one-a-day")
        before = _answers(audit)
    assert before["delivery"].merged == 1  # type: ignore[attr-defined]

    for leftover in (tmp_path / "demo").glob("harness.sqlite*"):
        leftover.unlink()
    with open_audit(audit_db) as audit:
        assert _answers(audit) == before
        # And maintenance, long after, changes nothing either (events aside: thinned).
        maintain(audit, now=time.time() + 200 * DAY, retention_days=90)
        after = _answers(audit)
    for name in ("cost", "delivery", "baselines"):
        assert after[name] == before[name]
