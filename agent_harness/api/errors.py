"""The library's errors as HTTP answers: one status per kind of error, the message as `detail`.

Messages are the library's own one-line texts, which never hold a token or a key.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exception_handlers import http_exception_handler
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, Response
from starlette.exceptions import HTTPException as StarletteHTTPException

from agent_harness.api.context import AuditNotRecorded, Busy, MonitoringOnly, NoAuditDatabase
from agent_harness.api.pools import NoSuchRole
from agent_harness.api.schemas import (
    KIND_PATTERN,
    LABEL_TEXT,
    MODEL_PATTERN,
    PLANNER_PATTERN,
    QUESTION_PATTERN,
    ROLE_PATTERN,
    SESSION_PATTERN,
    ErrorBody,
)
from agent_harness.audit.baselines import LABEL_PATTERN as BASELINE_LABEL
from agent_harness.audit.baselines import BaselineExists
from agent_harness.audit.database import AuditUnprotected
from agent_harness.errors import ConfigError, HarnessError, InputError, PlanRefused, UsageError
from agent_harness.inception.model import (
    PlannerAnswerInvalid,
    PlannerOverBudget,
    StepRefused,
    UnknownQuestion,
    UnknownSession,
)
from agent_harness.inception.session import PlannerKeyMissing
from agent_harness.models.client import ModelCallFailed
from agent_harness.models.parking import EndpointParked
from agent_harness.models.routes import VENDOR_DEFAULTS
from agent_harness.models.transport import TransportFailed
from agent_harness.pipeline.settings import RunRefused
from agent_harness.plan.model import PLAN_KEY_PATTERN
from agent_harness.queue.control import NothingToSteer, UnknownProjectHere
from agent_harness.queue.items import IllegalTransition, ItemBusy, NoProjectYet, UnknownItem
from agent_harness.queue.projects import (
    ITEM_PATTERN,
    NAME_PATTERN,
    OWNER_PATTERN,
    PLAN_PATH_PATTERN,
    PROJECT_PATTERN,
    REPO_PATTERN,
    WORK_DIR_PATTERN,
    BadProjectPath,
    ItemsExist,
    ProjectExists,
    UnknownProject,
)
from agent_harness.review.verdict import SameVendorRefused
from agent_harness.store.errors import StoreError
from agent_harness.tracker.github import NoToken
from agent_harness.tracker.protocol import TrackerError
from agent_harness.tracker.renumbering import PlanRenumbered
from agent_harness.tracker.sync import PlanKeyTaken

# Checked in order: the first class the error is an instance of gives the status.
STATUS: tuple[tuple[type[HarnessError], int], ...] = (
    (UnknownProject, 404),
    (UnknownProjectHere, 404),
    (NoProjectYet, 404),
    (NoSuchRole, 404),
    (UnknownItem, 404),
    (UnknownSession, 404),
    (UnknownQuestion, 404),  # before StepRefused, its base
    (NoAuditDatabase, 404),
    (MonitoringOnly, 409),
    (NoToken, 409),  # the server was given no tracker token
    (PlannerKeyMissing, 409),  # nor the planner's API key
    (ProjectExists, 409),
    (ItemsExist, 409),
    (ItemBusy, 409),
    (IllegalTransition, 409),
    (RunRefused, 409),
    (PlanKeyTaken, 409),  # another plan file's issues hold the key
    (PlanRenumbered, 409),  # the plan's tasks moved to other ids
    (NothingToSteer, 409),  # control of every project at work, with none at work
    (PlannerOverBudget, 409),  # the planner's next call could pass the session's budget
    (StepRefused, 409),  # BlockingOpen among them: approval with a BLOCKING question open
    (BaselineExists, 409),
    (BadProjectPath, 422),
    (PlanRefused, 422),
    (InputError, 422),
    (UsageError, 400),
    (SameVendorRefused, 400),  # a reviewer of the implementer's vendor
    (ConfigError, 400),
    (TrackerError, 502),
    # The planner (a model behind the server) failed: its answer did not fit twice, its
    # provider refused or is parked, or it could not be reached. The client's input was fine.
    (PlannerAnswerInvalid, 502),
    (ModelCallFailed, 502),
    (EndpointParked, 502),
    (TransportFailed, 502),
    (Busy, 503),
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
        "not UTF-8, a name given twice in one object), or input the server cannot use."
    ),
    413: _doc("Request body over the size limit."),
    415: _doc("A body declared as anything but JSON, or with a Content-Encoding."),
}
MISSING: Responses = {404: _doc("No such project or item.")}
REFUSED: Responses = {
    409: _doc(
        "Refused as things stand (monitoring only, a live claim, exists, a key or token the "
        "server was not given, a budget the next paid call could pass)."
    )
}
BAD: Responses = {400: _doc("Input the server cannot use (e.g. several projects, name one).")}
NO_AUDIT: Responses = {
    404: _doc(
        "No audit database yet: nothing was recorded (POST /api/audit/reconcile); or a project "
        "filter that neither the audit nor the work database has heard of."
    )
}
UPSTREAM: Responses = {502: _doc("The tracker failed or refused.")}
BUSY: Responses = {
    503: {
        **_doc(
            "The database cannot be used, or the server is reading as many plans as it reads "
            "at once (try again after Retry-After seconds)."
        ),
        "headers": {
            "Retry-After": {
                "description": "Seconds to wait before trying again (when busy).",
                "schema": {"type": "integer"},
            }
        },
    }
}


def install(app: FastAPI, token: str = "") -> None:
    """The error handlers and the description's error bodies. `token`: the server's own, never
    repeated in an answer (`GET /api/work/<token>` would quote it as the item not found)."""

    def unsaid(text: str) -> str:
        return text.replace(token, "[redacted HARNESS_TOKEN]") if token else text

    async def handle(request: Request, exc: Exception) -> JSONResponse:
        assert isinstance(exc, HarnessError)
        headers = {"Retry-After": str(exc.retry_after_s)} if isinstance(exc, Busy) else None
        detail = unsaid(exc.message)
        return JSONResponse({"detail": detail}, status_code=status_of(exc), headers=headers)

    async def invalid(request: Request, exc: Exception) -> JSONResponse:
        assert isinstance(exc, RequestValidationError)
        if any(error.get("type") == "json_invalid" for error in exc.errors()):
            # Text after the JSON, a cut-off body: not JSON at all, as every other such body.
            return JSONResponse({"detail": "the body does not read as JSON"}, status_code=400)
        return JSONResponse({"detail": unsaid(validation_detail(exc.errors()))}, status_code=422)

    async def http_error(request: Request, exc: Exception) -> Response:
        assert isinstance(exc, StarletteHTTPException)
        if exc.status_code == 405:
            # Starlette names the methods of the first route matching the path only: a path
            # served by a GET route and a POST route answered OPTIONS with `Allow: GET`.
            allowed = _methods_of(app, request.scope)
            if not allowed:  # a route left out of the description (/docs): Starlette's own
                said = (exc.headers or {}).get("Allow", "")
                allowed = {method.strip() for method in said.split(",") if method.strip()}
            if "GET" in allowed:
                allowed.add("HEAD")  # the guard answers HEAD wherever GET is served
            return JSONResponse(
                {"detail": "Method Not Allowed"},
                status_code=405,
                headers={"Allow": ", ".join(sorted(allowed))},
            )
        if exc.status_code == 400 and exc.detail == "There was an error parsing the body":
            # FastAPI's words for a body its JSON reader gave up on (nested too deep, a number
            # too long, bytes that are not UTF-8): said as every other body that is no JSON.
            return JSONResponse({"detail": "the body does not read as JSON"}, status_code=400)
        return await http_exception_handler(request, exc)

    app.add_exception_handler(HarnessError, handle)
    app.add_exception_handler(RequestValidationError, invalid)
    app.add_exception_handler(StarletteHTTPException, http_error)
    app.openapi = _with_error_bodies(app.openapi)  # type: ignore[method-assign]


def _methods_of(app: FastAPI, scope: Any) -> set[str]:
    """The methods the description documents for the request's path."""
    path, root = str(scope.get("path", "")), str(scope.get("root_path", ""))
    if root and path.startswith(root):  # behind a proxy's prefix (`serve --root-path`)
        path = path[len(root) :]
    allowed: set[str] = set()
    for template, methods in app.openapi().get("paths", {}).items():
        pattern = re.sub(r"\\\{[^}]+\\\}", "[^/]+", re.escape(template))
        if re.fullmatch(pattern, path):
            allowed |= {method.upper() for method in methods}
    return allowed


def validation_detail(errors: Sequence[Any]) -> str:
    """What FastAPI found wrong with a request, in one line, as every other error of the API
    says it (`{"detail": "..."}`).

    FastAPI's own answer is a list that echoes what failed as it came (`input`), and its
    handler failed on a body that is not UTF-8 (bytes), a string holding a lone surrogate
    (JSON's `"\\ud800"`) or `NaN`, making every such request a 500. Nothing of the input is
    repeated here; the text is made encodable."""
    # A value that is not None fails a field's `| None` member too: that says nothing.
    errors = [error for error in errors if "none" not in error.get("loc", ())]
    parts = []
    for error in errors[:5]:
        where = " ".join(str(part) for part in error.get("loc", ()) if not _union_tag(part))
        message = str(error.get("msg", "is not valid")).removeprefix("Value error, ")
        if error.get("type") == "string_pattern_mismatch":
            pattern = str((error.get("ctx") or {}).get("pattern", ""))
            message = f"should be {PATTERN_WORDS.get(pattern, 'as its description says')}"
        parts.append(f"{where}: {message}" if where else message)
    if len(errors) > 5:
        parts.append(f"and {len(errors) - 5} more")
    text = "; ".join(parts) or "the request does not match the API's description"
    return text.encode("utf-8", "replace").decode("utf-8")


def _union_tag(part: object) -> bool:
    """A step of an error's location naming a member of a union (`constrained-str`), not a
    field."""
    return isinstance(part, str) and ("constrained" in part or part.startswith("function-"))


# What a pattern of the description asks for, in words (a regular expression is no answer).
PATTERN_WORDS = {
    PROJECT_PATTERN: "a project id, owner/repo:plankey",
    ITEM_PATTERN: "an item id (letters, digits, '.', '_', '-')",
    WORK_DIR_PATTERN: "an absolute path without '..'",
    PLAN_PATH_PATTERN: "a path inside work_dir, without '..'",
    PLANNER_PATTERN: f"vendor:model, the vendor one of {', '.join(sorted(VENDOR_DEFAULTS))}",
    OWNER_PATTERN: "a repository owner (letters, digits and '-', at most 39)",
    NAME_PATTERN: "a repository name (letters, digits, '.', '_', '-', at most 100)",
    REPO_PATTERN: "owner/name, as GitHub names a repository",
    PLAN_KEY_PATTERN: "a plan key (letters, digits, '.', '_', '-', at most 64)",
    LABEL_TEXT: "text without control characters",
    SESSION_PATTERN: "a session id: 12 hex digits, as POST /api/inception answered",
    QUESTION_PATTERN: "a question id: Q and a number, such as Q1",
    KIND_PATTERN: "an event kind: lower-case letters and '_'",
    ROLE_PATTERN: "a role: lower-case letters and '_' (reviewer, implementer, planner)",
    MODEL_PATTERN: "vendor:model",
    BASELINE_LABEL: "a baseline label (letters, digits, '.', '_', ':', '/', '-', inner spaces)",
}

INVALID = (
    "The request does not match its description (a field missing, of the wrong type or out of "
    "range)."
)


def _with_error_bodies(describe: Callable[[], dict[str, Any]]) -> Callable[[], dict[str, Any]]:
    """FastAPI's OpenAPI description (servers and all), with every 422 answer's body as the API
    sends it: an `ErrorBody` like every other error, where FastAPI would describe its list."""
    done: list[dict[str, Any]] = []

    def openapi() -> dict[str, Any]:
        schema = describe()
        if not done or done[0] is not schema:
            _error_bodies(schema)
            done[:] = [schema]
        return schema

    return openapi


# What the guard refuses before any route runs, on every route (and for a request with a body,
# those below too): each route's description lists them, so a client learns them there.
GUARDED = {
    "400": "A request that could be read two ways (Content-Length with Transfer-Encoding, an "
    "Authorization header or a query parameter given twice), or input the server cannot use.",
    "413": "A request body (declared or sent) over the size limit.",
}
GUARDED_BODY = {
    "415": "A body not declared as JSON (Content-Type: application/json), or encoded.",
    "422": INVALID,
}


def _error_bodies(schema: dict[str, Any]) -> None:
    body = {"application/json": {"schema": {"$ref": "#/components/schemas/ErrorBody"}}}
    for operations in schema.get("paths", {}).values():
        for method, operation in operations.items():
            answers = operation.setdefault("responses", {})
            guarded = GUARDED | (GUARDED_BODY if method in ("post", "put", "patch") else {})
            for status, said in guarded.items():
                answers.setdefault(status, {"description": said, "content": body})
            answer = operation.get("responses", {}).get("422")
            if answer is None:
                continue
            if "ErrorBody" not in str(answer.get("content", "")):
                answer["description"] = INVALID
            elif INVALID not in answer["description"]:
                answer["description"] = f"{answer['description']} {INVALID}"
            answer["content"] = body
    components = schema.get("components", {}).get("schemas", {})
    for unused in ("HTTPValidationError", "ValidationError"):
        components.pop(unused, None)
