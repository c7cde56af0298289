"""/api/audit over a real work database and a real audit database beside it: the record
written by POST /api/audit/reconcile, answered by the audit's own functions."""

from __future__ import annotations

from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from agent_harness.audit.observe import observe
from agent_harness.store.database import Store
from agent_harness.store.events import ModelCall
from agent_harness.testing.clock import FakeClock
from tests.api.conftest import AUTH, PROJECT

pytestmark = pytest.mark.integration

UNPRICED = "gpt-nobody-prices-this"


def _calls(store: Store, model: str, n: int) -> None:
    for _ in range(n):
        store.append_event(
            PROJECT,
            None,
            ModelCall(role="reviewer", vendor="openai", model=model, tokens_in=900, tokens_out=80),
        )


def test_a_call_of_unknown_price_costs_null_with_its_reason_never_zero(
    supervised: TestClient, api_store: Store
) -> None:
    missing = supervised.get("/api/audit/cost", headers=AUTH)
    assert missing.status_code == 404 and "POST /api/audit/reconcile" in missing.json()["detail"]
    _calls(api_store, UNPRICED, 2)
    recorded = supervised.post("/api/audit/reconcile", headers=AUTH)
    assert recorded.status_code == 200
    assert recorded.json()["added"] == len(api_store.events(0, 1000))
    spent = supervised.get("/api/audit/cost", params={"project": PROJECT}, headers=AUTH).json()
    assert spent["cost_usd"] is None and spent["unknown_calls"] == 2
    [line] = [row for row in spent["lines"] if row["model"] == UNPRICED]
    assert (line["cost_usd"], line["unknown_calls"], line["calls"]) == (None, 2, 2)
    [unknown] = [row for row in spent["unknown"] if row["model"] == UNPRICED]
    assert unknown["calls"] == 2 and unknown["reason"].startswith("no price known")
    assert UNPRICED in unknown["reason"]
    assert "unknown price" in spent["summary"]
    again = supervised.post("/api/audit/reconcile", headers=AUTH).json()
    assert again["added"] == 0  # recording twice adds nothing twice


def test_a_baseline_is_recorded_once_and_a_second_is_refused(supervised: TestClient) -> None:
    first = {"label": "before-harness", "delivered": 40, "days": 30}
    made = supervised.post("/api/audit/baselines", json=first, headers=AUTH)
    assert made.status_code == 201 and made.json()["delivered"] == 40
    changed = {**first, "delivered": 400}
    refused = supervised.post("/api/audit/baselines", json=changed, headers=AUTH)
    assert refused.status_code == 409
    assert "already recorded" in refused.json()["detail"]
    [kept] = supervised.get("/api/audit/baselines", headers=AUTH).json()["baselines"]
    assert (kept["baseline"]["label"], kept["baseline"]["delivered"]) == ("before-harness", 40)
    assert kept["baseline_per_day"] == pytest.approx(40 / 30, abs=1e-4)


def test_events_page_by_row_id_and_survive_maintenance(
    supervised: TestClient, api_store: Store, clock: FakeClock
) -> None:
    supervised.post("/api/audit/reconcile", headers=AUTH)

    def page(after: int, limit: int) -> dict[str, object]:
        answer = supervised.get(
            "/api/audit/events", params={"after": after, "limit": limit}, headers=AUTH
        )
        assert answer.status_code == 200
        return answer.json()  # type: ignore[no-any-return]

    everything = [e["id"] for e in page(0, 1000)["events"]]  # type: ignore[index]
    assert len(everything) == len(api_store.events(0, 1000)) > 3
    seen: list[int] = []
    after: int | None = 0
    while after is not None:
        got = page(after, 2)
        seen += [e["id"] for e in got["events"]]  # type: ignore[attr-defined]
        after = got["next_after"]  # type: ignore[assignment]
    assert seen == everything
    assert supervised.get("/api/audit/rollups", headers=AUTH).json() == {"days": []}
    clock.advance(2 * 86_400)  # the day of those events is complete now
    done = supervised.post("/api/audit/maintenance", headers=AUTH).json()
    assert done["rolled"] == len(everything) and done["thinned"] == 0
    [day] = supervised.get("/api/audit/rollups", headers=AUTH).json()["days"]
    assert day["events"] == len(everything)


def test_monitoring_reads_the_audit_and_refuses_to_write_it(
    monitoring: TestClient, api_store: Store, db_dir: Path
) -> None:
    baseline = {"label": "b", "delivered": 1, "days": 1}
    for path, body in (
        ("/api/audit/reconcile", None),
        ("/api/audit/baselines", baseline),
        ("/api/audit/maintenance", None),
    ):
        refused = monitoring.post(path, json=body, headers=AUTH)
        assert refused.status_code == 409, path
        assert refused.json()["detail"].startswith("monitoring only")
    assert not (db_dir / "audit.sqlite").exists()
    observe(api_store, str(db_dir / "audit.sqlite"))  # as `agent-harness ingest` beside it
    health = monitoring.get("/api/audit/health", headers=AUTH).json()
    assert health["work_events_waiting"] == 0 and health["last_event_id"] is not None
    delivered = monitoring.get("/api/audit/delivery", params={"since": "2020-01-01"}, headers=AUTH)
    assert delivered.status_code == 200 and delivered.json()["merged"] == 0


@pytest.mark.parametrize(
    ("route", "body", "field"),
    [
        ("/api/audit/baselines", {"label": "b", "delivered": False, "days": 30}, "delivered"),
        ("/api/audit/baselines", {"label": "b", "delivered": 4, "days": True}, "days"),
        ("/api/audit/baselines", {"label": "b", "delivered": "4", "days": 30}, "delivered"),
        ("/api/plan/sync", {"project": PROJECT, "dry_run": 0}, "dry_run"),
        ("/api/plan/sync", {"project": PROJECT, "dry_run": "no"}, "dry_run"),
        ("/api/projects", {"repo": "me/app", "work_dir": "/w", "plan": "P.md",
                           "reviewer": "codex", "workers": True}, "workers"),
    ],
)  # fmt: skip
def test_a_value_of_the_wrong_json_type_is_refused_not_coerced(
    supervised: TestClient, route: str, body: dict[str, object], field: str
) -> None:
    # Read loosely, `"dry_run": 0` was false (a dry run that writes) and `false` a count of 0.
    answer = supervised.post(route, json=body, headers=AUTH)
    assert answer.status_code == 422
    assert field in answer.text
    assert supervised.get("/api/audit/baselines", headers=AUTH).json().get("baselines", []) == []


def test_a_whole_number_written_with_a_point_is_still_a_count(supervised: TestClient) -> None:
    # JSON Schema's `integer` takes 40.0 (schemathesis sends it): refusing it broke the schema.
    body = {"label": "before", "delivered": 40.0, "days": 30}
    made = supervised.post("/api/audit/baselines", json=body, headers=AUTH)
    assert made.status_code == 201 and made.json()["delivered"] == 40
    half = supervised.post("/api/audit/baselines", json={**body, "label": "b", "delivered": 4.5},
                           headers=AUTH)  # fmt: skip
    assert half.status_code == 422


def test_a_period_too_short_to_be_a_rate_is_refused_and_one_kept_from_before_stays_json(
    supervised: TestClient,
) -> None:
    # schemathesis: 5e-324 days was recorded, and its rate (infinite) came back as null where
    # the schema promises a number.
    tiny = {"label": "tiny", "delivered": 40, "days": 5e-324}
    assert supervised.post("/api/audit/baselines", json=tiny, headers=AUTH).status_code == 422
    ok = {**tiny, "days": 0.01}
    assert supervised.post("/api/audit/baselines", json=ok, headers=AUTH).status_code == 201
    [row] = supervised.get("/api/audit/baselines", headers=AUTH).json()["baselines"]
    assert row["baseline_per_day"] == 4000.0


def test_a_project_filter_nobody_has_heard_of_is_a_404_not_an_empty_answer(
    supervised: TestClient, api_store: Store
) -> None:
    _calls(api_store, UNPRICED, 1)
    supervised.post("/api/audit/reconcile", headers=AUTH)
    typo = PROJECT + "x"
    for route in ("cost", "delivery", "events", "baselines"):
        answer = supervised.get(f"/api/audit/{route}", params={"project": typo}, headers=AUTH)
        assert answer.status_code == 404, route
        detail = answer.json()["detail"]
        assert f"no project {typo}" in detail and PROJECT in detail
        known = supervised.get(f"/api/audit/{route}", params={"project": PROJECT}, headers=AUTH)
        assert known.status_code == 200, route
