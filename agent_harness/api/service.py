"""`/healthz`: the one route that needs no token. It says the server answers, nothing more
(the smoke test, `agent_harness.api.smoke`, tells "healthy" from "able to run anything")."""

from __future__ import annotations

from importlib.metadata import PackageNotFoundError, version
from typing import Annotated

from fastapi import APIRouter, Depends, Request

from agent_harness.api.context import ApiContext, context
from agent_harness.api.errors import AUTH
from agent_harness.api.schemas import Health, Index

router = APIRouter(tags=["service"])
# The root, behind the token as every path but /healthz is (included with the bearer scheme).
index_router = APIRouter(tags=["service"], responses=AUTH)


def _version() -> str:
    try:
        return version("agent-harness-fleet")
    except PackageNotFoundError:  # running from a source tree that was never installed
        return "unknown"


VERSION = _version()


@index_router.get("/", summary="Where to go from here (the address the server's start line prints)")
def index(ctx: Annotated[ApiContext, Depends(context)], request: Request) -> Index:
    """The root answered 404 with the token (401 without): the one address `serve` prints."""
    root = request.scope.get("root_path", "").rstrip("/")
    paths = {
        "summary": "/api/summary",
        "projects": "/api/projects",
        "work": "/api/work",
        "events": "/api/events",
        "description (OpenAPI)": "/openapi.json",
        "reference (in a browser, through a proxy that adds the token)": "/docs",
        "health (no token)": "/healthz",
    }
    return Index(mode=ctx.mode, version=VERSION, links={k: root + v for k, v in paths.items()})


@router.get("/healthz", summary="The server answers (no token needed)")
def healthz(ctx: Annotated[ApiContext, Depends(context)]) -> Health:
    return Health(status="ok", mode=ctx.mode, version=VERSION)
