"""The flags that set a configuration key, shared by `run` and `config`, and loading the
layered settings for a command (with the warnings a person should see)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import click

if TYPE_CHECKING:
    from agent_harness.config import LoadedSettings

F = TypeVar("F", bound=Callable[..., Any])

# click parameter name -> the dotted key it sets (the "flag" layer of the configuration).
FLAG_KEYS: dict[str, str] = {
    "db": "store.db",
    "max_attempts": "budgets.max_attempts",
    "agent_timeout": "budgets.agent_timeout_s",
    "checks": "checks.commands",
    "plan_key": "tracker.plan_key",
}


def given_flags(ctx: click.Context, options: Mapping[str, Any]) -> dict[str, Any]:
    """The configuration keys this command line set: only flags typed on it, so a value
    click filled from the environment or a default keeps the layer it came from."""
    from click.core import ParameterSource

    flags: dict[str, Any] = {}
    for name, key in FLAG_KEYS.items():
        if ctx.get_parameter_source(name) is not ParameterSource.COMMANDLINE:
            continue
        value = options.get(name)
        flags[key] = list(value) if isinstance(value, tuple) else value
    return flags


def load_cli_settings(
    flags: Mapping[str, Any] | None = None, config_file: Path | None = None
) -> LoadedSettings:
    """The layered settings; each warning (a token written in a file) is one stderr line."""
    from agent_harness.config import load_settings

    loaded = load_settings(flags=flags, config_file=config_file)
    for warning in loaded.warnings:
        click.echo(f"warning: {warning}", err=True)
    return loaded


def setting_options(func: F) -> F:
    """The flags of `run` that set a configuration key, for `config` to show their effect."""
    options = [
        click.option("--plan-key", metavar="KEY", help="As `run --plan-key` (tracker.plan_key)."),
        click.option(
            "--agent-timeout",
            "agent_timeout",
            type=float,
            help="As `run --agent-timeout` (budgets.agent_timeout_s).",
        ),
        click.option(
            "--max-attempts",
            type=click.IntRange(1, 100),
            help="As `run --max-attempts` (budgets.max_attempts).",
        ),
        click.option(
            "--check",
            "checks",
            multiple=True,
            metavar="CMD",
            help="As `run --check` (checks.commands).",
        ),
        click.option("--db", metavar="URL", help="As `run --db` (store.db)."),
    ]
    for option in options:
        func = option(func)
    return func
