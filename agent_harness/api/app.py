"""The application: the routers, the error statuses, the guard, and the OpenAPI description.

`create_app` is what `serve` runs under uvicorn and what the tests drive in-process.
"""

from __future__ import annotations

from fastapi import FastAPI
from fastapi.security import HTTPBearer

from agent_harness.api import (
    audit,
    control,
    errors,
    inception,
    operations,
    plan,
    projects,
    roles,
    service,
    work,
)
from agent_harness.api.context import ApiContext
from agent_harness.api.guard import DEFAULT_MAX_BODY, Guard

DESCRIPTION = """\
The documented API of agent-harness: a host (a dev environment, a dashboard, a script) watches
and drives the fleet through it.

Every route but `/healthz` needs `Authorization: Bearer <HARNESS_TOKEN>`. A monitoring server
(the default) only reads; `serve --supervise` also runs a worker pool per started project.
"""

# Declared so the schema says how to authenticate; the guard is what enforces it.
bearer = HTTPBearer(auto_error=False, description="The server's HARNESS_TOKEN.")


def create_app(ctx: ApiContext, *, token: str, max_body: int = DEFAULT_MAX_BODY) -> FastAPI:
    """The app; a proxy prefix (`--root-path`) is the server's to set (uvicorn's root_path),
    and the schema then advertises it as its server URL."""
    from fastapi import Security

    app = FastAPI(
        title="agent-harness",
        version=service.VERSION,
        description=DESCRIPTION,
        # `/api/summary/` is no path of the API: a redirect would repeat the request's Host in
        # its Location, which a proxy passing Host through turns into a redirect anywhere.
        redirect_slashes=False,
    )
    app.state.ctx = ctx
    app.include_router(service.router)
    secured = [Security(bearer)]
    app.include_router(service.index_router, dependencies=secured)
    for module in (projects, work, plan, operations, control, roles, inception, audit):
        app.include_router(module.router, dependencies=secured)
    errors.install(app, token=token)
    app.add_middleware(Guard, token=token, max_body=max_body)
    return app
