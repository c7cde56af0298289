"""`agent-harness forge serve`: run the embedded GitHub-compatible forge in the foreground."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from agent_harness.cli.output import from_env


@click.group(
    epilog="""\b
Examples:
  agent-harness forge serve --data .forge --port 8080
"""
)
def forge() -> None:
    """The embedded GitHub-compatible forge (offline issues, PRs and git hosting)."""


@forge.command(
    epilog="""\b
Examples:
  agent-harness forge serve --data .forge --port 8080
  GITHUB_API_URL=http://127.0.0.1:8080 GITHUB_TOKEN=forge-token agent-harness plan PLAN.md
"""
)
@click.option(
    "--data",
    "data_dir",
    type=click.Path(path_type=Path),
    default=Path(".forge"),
    show_default=True,
    help="Directory for the database and bare git repositories.",
)
@click.option("--host", default="127.0.0.1", show_default=True, help="Address to listen on.")
@click.option("--port", default=8080, show_default=True, help="Port to listen on (0 = any).")
@click.option(
    "--token",
    default="forge-token",
    show_default=True,
    callback=from_env("FORGE_TOKEN"),
    help="Token clients must send (Authorization: token ...); env FORGE_TOKEN.",
)
@click.option("--read-only-token", default=None, help="An extra token that may only read.")
@click.option("--rate-limit", default=5000, show_default=True, help="Requests per token per hour.")
def serve(
    data_dir: Path, host: str, port: int, token: str, read_only_token: str | None, rate_limit: int
) -> int:
    """Serve the GitHub REST subset until Ctrl-C; repositories live in DATA/git as bare repos.

    Point PyGithub at it with Github(auth=Auth.Token(TOKEN), base_url=URL); clone_url of a
    repository is a file:// URL that git clone and git push use directly.
    """
    from agent_harness.forge import Forge, ForgeServer

    hub = Forge(data_dir, token=token, rate_limit=rate_limit, read_only_token=read_only_token)
    server = ForgeServer(hub, host=host, port=port)
    server.bind()
    click.echo(f"forge serving {server.api_url} (data: {data_dir.resolve()})")
    # Only the well-known default is repeated; a token of the user's own is never printed.
    shown = token if token == "forge-token" else "<your token>"
    click.echo(f"  export GITHUB_API_URL={server.api_url} GITHUB_TOKEN={shown}")
    click.echo(f"  PyGithub: Github(auth=Auth.Token({shown!r}), base_url={server.api_url!r})")
    click.echo("  Ctrl-C to stop")
    sys.stdout.flush()
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        click.echo("forge stopped")
    finally:
        hub.close()
    return 0
