"""The library's errors as HTTP answers: one status per kind of error, the message as `detail`.

Messages are the library's own one-line texts, which never hold a token or a key.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse

from agent_harness.api.context import AuditNotRecorded, MonitoringOnly, NoAuditDatabase
from agent_harness.api.schemas import ErrorBody
from agent_harness.audit.baselines import BaselineExists
from agent_harness.audit.database import AuditUnprotected
from agent_harness.errors import ConfigError, HarnessError, InputError, PlanRefused, UsageError
from agent_harness.inception.model import (
    PlannerAnswerInvalid,
    StepRefused,
    UnknownQuestion,
    UnknownSession,
)
from agent_harness.models.client import ModelCallFailed
from agent_harness.models.parking import EndpointParked
from agent_harness.models.transport import TransportFailed
from agent_harness.pipeline.settings import RunRefused
from agent_harness.queue.items import IllegalTransition, ItemBusy, UnknownItem
from agent_harness.queue.projects import BadProjectPath, ProjectExists, UnknownProject
from agent_harness.store.errors import StoreError
from agent_harness.tracker.protocol import TrackerError
from agent_harness.tracker.sync import PlanKeyTaken

# Checked in order: the first class the error is an instance of gives the status.
STATUS: tuple[tuple[type[HarnessError], int], ...] = (
    (UnknownProject, 404),
    (UnknownItem, 404),
    (UnknownSession, 404),
    (UnknownQuestion, 404),  # before StepRefused, its base
    (NoAuditDatabase, 404),
    (MonitoringOnly, 409),
    (ProjectExists, 409),
    (ItemBusy, 409),
    (IllegalTransition, 409),
    (RunRefused, 409),
    (PlanKeyTaken, 409),  # another plan file's issues hold the key
    (StepRefused, 409),  # BlockingOpen among them: approval with a BLOCKING question open
    (BaselineExists, 409),
    (BadProjectPath, 422),
    (PlanRefused, 422),
    (InputError, 422),
    (UsageError, 400),
    (ConfigError, 400),
    (TrackerError, 502),
    # The planner (a model behind the server) failed: its answer did not fit twice, its
    # provider refused or is parked, or it could not be reached. The client's input was fine.
    (PlannerAnswerInvalid, 502),
    (ModelCallFailed, 502),
    (EndpointParked, 502),
    (TransportFailed, 502),
    (StoreError, 503),
    (AuditUnprotected, 503),
    (AuditNotRecorded, 503),
)


def status_of(exc: HarnessError) -> int:
    for kind, status in STATUS:
        if isinstance(exc, kind):
            return status
    return 500


def _doc(text: str) -> dict[str, Any]:
    return {"model": ErrorBody, "description": text}


Responses = dict[int | str, dict[str, Any]]


AUTH: Responses = {
    401: _doc("Missing or wrong bearer token."),
    503: _doc("The database cannot be used."),
}
BODY: Responses = {
    # FastAPI answers a body it cannot parse with 400 before the route runs.
    400: _doc(
        "A body that does not read as JSON (malformed, nested too deep, a number too long, "
        "not UTF-8), or input the server cannot use."
    ),
    413: _doc("Request body over the size limit."),
}
MISSING: Responses = {404: _doc("No such project or item.")}
REFUSED: Responses = {409: _doc("Refused as things stand (monitoring only, a live claim, exists).")}
BAD: Responses = {400: _doc("Input the server cannot use (e.g. several projects, name one).")}
NO_AUDIT: Responses = {
    404: _doc("No audit database yet: nothing was recorded (POST /api/audit/reconcile).")
}
UPSTREAM: Responses = {502: _doc("The tracker failed or refused.")}


def install(app: FastAPI) -> None:
    async def handle(request: Request, exc: Exception) -> JSONResponse:
        assert isinstance(exc, HarnessError)
        return JSONResponse({"detail": exc.message}, status_code=status_of(exc))

    async def invalid(request: Request, exc: Exception) -> JSONResponse:
        assert isinstance(exc, RequestValidationError)
        return JSONResponse({"detail": validation_detail(exc.errors())}, status_code=422)

    app.add_exception_handler(HarnessError, handle)
    app.add_exception_handler(RequestValidationError, invalid)


def validation_detail(errors: Sequence[Any]) -> list[Any]:
    """FastAPI's 422 `detail`, in a form that always encodes as JSON.

    FastAPI's own handler echoes what failed as it came (`input`): a body that is not UTF-8
    (bytes), a string holding a lone surrogate (JSON's `"\\ud800"`), `NaN` (Python's JSON reader
    takes it) or an exception a validator raised made that handler fail, and every such
    request a 500. Here text is re-encoded with replacement characters, numbers JSON cannot
    hold become text, and an input too deep to walk is left out."""
    detail = []
    for error in errors:
        try:
            detail.append(_encodable(error))
        except RecursionError:
            detail.append(_encodable({k: v for k, v in dict(error).items() if k != "input"}))
    return detail


def _encodable(value: Any) -> Any:
    if isinstance(value, str):
        return value.encode("utf-8", "replace").decode("utf-8")
    if isinstance(value, bytes):
        return value.decode("utf-8", "replace")
    if isinstance(value, bool) or value is None or isinstance(value, int):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else str(value)
    if isinstance(value, Mapping):
        return {str(_encodable(str(key))): _encodable(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [_encodable(item) for item in value]
    return _encodable(str(value))
