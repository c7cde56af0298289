"""Run the API under uvicorn: open the database, build the pools when supervising, serve until
told to stop, then drain the pools without waiting for their work (see `pools`)."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from agent_harness.api.context import ApiContext
from agent_harness.errors import UsageError


@dataclass(frozen=True)
class ServeRequest:
    db: str | None
    audit_db: str | None
    host: str
    port: int
    root_path: str
    supervise: bool
    work_root: Path | None
    max_body: int

    @classmethod
    def of(cls, options: dict[str, Any]) -> ServeRequest:
        root = str(options.get("root_path") or "").rstrip("/")
        work_root = options.get("work_root")
        return cls(
            db=options.get("db"),
            audit_db=options.get("audit_db"),
            host=str(options["host"]),
            port=int(options["port"]),
            root_path=root,
            supervise=bool(options.get("supervise")),
            work_root=Path(work_root) if work_root else None,
            max_body=int(options.get("max_body") or 1024 * 1024),
        )


def build_context(request: ServeRequest, settings: Any) -> ApiContext:
    """The store, opened and migrated, and the pools when supervising (resumed: every project
    a killed server left running is started again)."""
    from agent_harness.config import database_url
    from agent_harness.store.database import open_store

    url = database_url(settings, request.db)
    store = open_store(url)
    ctx = ApiContext(
        store=store,
        mode="supervised" if request.supervise else "monitoring",
        work_root=request.work_root,
        audit_url=request.audit_db,
        settings=settings,
    )
    if request.supervise:
        from agent_harness.api.pools import ProjectPools

        pools = ProjectPools(store, settings, db_url=url, audit_db=request.audit_db)
        ctx.pools = pools
        pools.resume()
    return ctx


def without_query(record: logging.LogRecord) -> bool:
    """An access log line without the request's query string, and its path masked: a client
    that sends its token as `?token=…` or as a path (`GET /<token>`, refused) would otherwise
    have it written to the log."""
    from agent_harness.secrets.redact import redact

    args = record.args
    if isinstance(args, tuple) and len(args) == 5 and isinstance(args[2], str):
        path, asked, _ = args[2].partition("?")
        shown = redact(path) + ("?(query not logged)" if asked else "")
        record.args = (*args[:2], shown, *args[3:])
    return True


def refuse_taken_port(host: str, port: int) -> None:
    """A port another program listens on is said in one line (uvicorn printed four lines of
    its start, an error and its shutdown, and exited 3)."""
    import errno
    import socket

    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as uvicorn binds
        try:
            probe.bind((host, port))
        except OSError as exc:
            if exc.errno == errno.EADDRINUSE:
                raise UsageError(
                    f"port {port} on {host} is in use by another program; give another with --port"
                ) from None
            raise UsageError(f"cannot listen on {host}:{port}: {exc.strerror or exc}") from None


def serve_api(request: ServeRequest, token: str) -> int:
    import uvicorn

    from agent_harness.api.app import create_app
    from agent_harness.api.deadline import MAX_CONNECTIONS, DeadlinedH11
    from agent_harness.config import load_settings

    refuse_taken_port(request.host, request.port)  # before any pool starts, in one line
    ctx = build_context(request, load_settings().settings)
    try:
        app = create_app(ctx, token=token, max_body=request.max_body)
        config = uvicorn.Config(
            app,
            host=request.host,
            port=request.port,
            root_path=request.root_path,
            log_level="info",
            server_header=False,
            http=DeadlinedH11,  # a request not whole within 30 s is closed (slow clients)
            limit_concurrency=MAX_CONNECTIONS,
        )  # configures uvicorn's loggers, so the line below is shown with its own
        logging.getLogger("uvicorn.access").addFilter(without_query)
        logging.getLogger("uvicorn.error").info(
            "agent-harness serve: %s mode, database %s, projects running: %s",
            ctx.mode,
            ctx.store.where,  # a PostgreSQL URL is shown with its password masked
            ", ".join(ctx.running()) or "none",
        )
        uvicorn.Server(config).run()
    finally:
        if ctx.pools is not None:
            ctx.pools.close()
        ctx.store.close()
    return 0
