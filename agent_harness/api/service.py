"""`/healthz`: the one route that needs no token. It says the server answers, nothing more
(the smoke test, `agent_harness.api.smoke`, tells "healthy" from "able to run anything")."""

from __future__ import annotations

from importlib.metadata import PackageNotFoundError, version
from typing import Annotated

from fastapi import APIRouter, Depends

from agent_harness.api.context import ApiContext, context
from agent_harness.api.schemas import Health

router = APIRouter(tags=["service"])


def _version() -> str:
    try:
        return version("agent-harness-fleet")
    except PackageNotFoundError:  # running from a source tree that was never installed
        return "unknown"


VERSION = _version()


@router.get("/healthz", summary="The server answers (no token needed)")
def healthz(ctx: Annotated[ApiContext, Depends(context)]) -> Health:
    return Health(status="ok", mode=ctx.mode, version=VERSION)
