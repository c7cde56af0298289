"""`agent-harness config`: the effective configuration and where each value came from."""

from __future__ import annotations

from pathlib import Path

import click

from agent_harness.cli.output import console, print_json
from agent_harness.cli.settings_opts import given_flags, load_cli_settings, setting_options


@click.command(
    epilog="""\b
Examples:
  agent-harness config
  AGENT_HARNESS_BUDGETS__MAX_ATTEMPTS=5 agent-harness config --json
  agent-harness config --max-attempts 5 --check 'pytest -q'   # what `run` would use
"""
)
@click.option("--json", "as_json", is_flag=True, help="Print as JSON.")
@click.option(
    "--file",
    "config_file",
    type=click.Path(path_type=Path),
    help="Read this config file instead of searching for agent-harness.toml.",
)
@setting_options
def config(as_json: bool, config_file: Path | None, **options: object) -> int:
    """Show the effective configuration and the source of each value.

    Layers, lowest first: defaults, agent-harness.toml (or [tool.agent-harness] in
    pyproject.toml), environment AGENT_HARNESS_SECTION__KEY, then command-line flags: give
    `run`'s flags here to see what a run with them would use. Secrets are shown masked; a
    token written in a config file is warned about on stderr.
    """
    from rich.table import Table

    flags = given_flags(click.get_current_context(), options)
    loaded = load_cli_settings(flags=flags, config_file=config_file)
    if as_json:
        print_json(
            {
                "file": str(loaded.file) if loaded.file else None,
                **loaded.as_json(),
                "warnings": loaded.warnings,
            }
        )
        return 0
    table = Table(title=f"config file: {loaded.file or 'none found'}", title_justify="left")
    for name in ("key", "value", "source"):
        table.add_column(name)
    for key, value, source in loaded.rows():
        table.add_row(key, value, source)
    console().print(table)
    return 0
