"""schemathesis, in-process against the ASGI app with the token, over every route and method
in /openapi.json: no server error, no answer that breaks its own schema, no
status the schema does not list, no content type it does not say."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import schemathesis
from hypothesis import HealthCheck, given, settings
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    response_schema_conformance,
    status_code_conformance,
    unsupported_method,
)

from agent_harness.api.app import create_app
from agent_harness.api.context import ApiContext
from agent_harness.api.pools import ProjectPools
from agent_harness.audit.observe import observe
from agent_harness.config import Settings
from agent_harness.store.database import open_store
from agent_harness.testing.clock import FakeClock
from agent_harness.testing.model_server import ModelServer, ScriptedResponder
from agent_harness.testing.planner_rules import inception_rules
from tests.api.conftest import AUTH, TOKEN, seed
from tests.inception.conftest import KEY

pytestmark = pytest.mark.integration


# Supervised: every write route runs its code (a monitoring server answers them 409 up front,
# which test_routes.py shows).
@pytest.fixture(params=["supervised"])
def api_schema(request: pytest.FixtureRequest, db_dir: Path) -> Iterator[object]:
    clock = FakeClock()
    store = open_store(str(db_dir / "fuzz.sqlite"), clock=clock)
    seed(store, clock)
    observe(store, str(db_dir / "audit.sqlite"))  # the audit routes answer from a record
    settings = Settings(state_dir=str(db_dir / "state"))
    pools = ProjectPools(store, settings, idle_s=3600) if request.param == "supervised" else None
    # The inception routes reach a planner: the scripted one, on loopback.
    planner = ModelServer([ScriptedResponder(inception_rules)], api_key=KEY).start()
    env = {"OPENAI_BASE_URL": f"{planner.url}/v1", "OPENAI_API_KEY": KEY}
    ctx = ApiContext(store=store, mode=request.param, pools=pools, work_root=db_dir, env=env)
    app = create_app(ctx, token=TOKEN)
    try:
        yield schemathesis.openapi.from_asgi("/openapi.json", app, headers=AUTH)
    finally:
        planner.close()
        if pools is not None:
            pools.close()
        store.close()


# schemathesis' own pytest plumbing (`from_fixture`) reaches into pytest internals that pytest 9
# no longer has; one Hypothesis test per operation, driven from here, does the same work.
def _fuzz(operation: Any) -> None:
    @given(case=operation.as_strategy())
    @settings(
        max_examples=5,
        deadline=None,
        suppress_health_check=list(HealthCheck),
        derandomize=True,
        database=None,
    )
    def check(case: schemathesis.Case) -> None:
        response = case.call(headers=AUTH)
        assert response.status_code < 500, (case.method, case.formatted_path, response.text)
        case.validate_response(
            response,
            checks=[
                status_code_conformance,
                content_type_conformance,
                response_schema_conformance,
                unsupported_method,  # and a 405 names every method of the path in Allow
            ],
        )

    check()


def test_every_route_keeps_to_its_schema(api_schema: Any) -> None:
    operations = [result.ok() for result in api_schema.get_all_operations()]
    labels = {operation.label for operation in operations}
    assert {"GET /api/work", "POST /api/projects", "POST /api/plan/sync", "GET /healthz"} <= labels
    assert "POST /api/inception/{session_id}/questions/{question_id}" in labels
    audit = {"GET /api/audit/cost", "POST /api/audit/baselines", "POST /api/audit/reconcile"}
    assert audit <= labels
    assert len(operations) == 35
    for operation in operations:
        _fuzz(operation)
