"""`agent-harness serve`: the HTTP API, watching the fleet (default) or also running it."""

from __future__ import annotations

from pathlib import Path

import click

from agent_harness.cli.output import from_env, host_option


@click.command(
    epilog="""\b
Two modes:
  monitoring (default)  reads only: projects, work, events, errors, summary, the audit, plan
                        parse and dry-run sync. Nothing is written; `start` answers 409;
                        a --db where no run has been is refused, not made.
  --supervise           the same API plus a worker pool per started project: register a
                        project, start and stop it, add work, retry items, sync for real,
                        and write the audit (baselines, recording the work log, maintenance).

\b
Examples:
  export HARNESS_TOKEN=$(openssl rand -hex 32)
  agent-harness serve                                  # monitoring, on 127.0.0.1:8765
  agent-harness serve --db postgresql://h/harness --host 0.0.0.0 --root-path /harness
  agent-harness serve --supervise --work-root /srv/clones
  curl -H "Authorization: Bearer $HARNESS_TOKEN" http://127.0.0.1:8765/api/summary
  curl -H "Authorization: Bearer $HARNESS_TOKEN" http://127.0.0.1:8765/openapi.json
                                      # the description; /docs needs a proxy adding the token
"""
)
@click.option(
    "--db",
    metavar="URL",
    callback=from_env("AGENT_HARNESS_DB"),
    help="Database URL (env AGENT_HARNESS_DB), as for every other command.",
)
@click.option(
    "--audit-db",
    metavar="URL",
    callback=from_env("AGENT_HARNESS_AUDIT_DB"),
    help="Audit database URL (env AGENT_HARNESS_AUDIT_DB), as for every other command.",
)
@host_option
@click.option("--port", default=8765, show_default=True, type=click.IntRange(0, 65535))
@click.option(
    "--root-path",
    default="",
    metavar="PATH",
    help="Prefix a proxy serves the API under (e.g. /harness), so the schema's URLs and the "
    "root's links carry it. The proxy strips the prefix before passing a request on: the "
    "server itself answers /api/..., not /harness/api/....",
)
@click.option(
    "--supervise",
    is_flag=True,
    help="Also run a worker pool per started project (default: monitoring only).",
)
@click.option(
    "--work-root",
    type=click.Path(path_type=Path, file_okay=False),
    help="With --supervise: registered work dirs must lie under this directory.",
)
@click.option(
    "--max-body",
    default=1024 * 1024,
    show_default=True,
    type=click.IntRange(1024, 64 * 1024 * 1024),
    help="Largest request body accepted, in bytes.",
)
def serve(**options: object) -> int:
    """Serve the documented HTTP API (OpenAPI at /openapi.json, Swagger UI at /docs).

    HARNESS_TOKEN must be set: every route but /healthz needs `Authorization: Bearer
    <token>`, and without a token the server refuses to start rather than come up open. A
    browser sends no such header by itself: reach /docs through a proxy that adds it.
    """
    from agent_harness.api.serving import ServeRequest, serve_api
    from agent_harness.errors import UsageError
    from agent_harness.secrets.process import process_env

    token = process_env().get("HARNESS_TOKEN", "")
    if not token.strip():
        raise UsageError("HARNESS_TOKEN is not set: the API refuses to start without a token")
    if len(token) < MIN_TOKEN or not (token.isascii() and token.isprintable()) or " " in token:
        # A short token is guessed; one with spaces or beyond ASCII no client can send.
        raise UsageError(
            f"HARNESS_TOKEN must be at least {MIN_TOKEN} printable ASCII characters without "
            "spaces; make one with: openssl rand -hex 32"
        )
    request = ServeRequest.of(options)
    if not request.supervise:
        _refuse_missing_database(request.db)
    return serve_api(request, token)


def _refuse_missing_database(flag: str | None) -> None:
    """Monitoring reads what runs wrote: a `--db` naming no file made an empty database there
    (its folders too) and served it as healthy, with nothing in it."""
    from agent_harness.cli.output import refuse_missing_database
    from agent_harness.config import database_url, load_settings

    url = database_url(load_settings().settings, flag)
    hint = "give --db the one your runs use, or serve --supervise to start one"
    refuse_missing_database(url, hint)


MIN_TOKEN = 16
