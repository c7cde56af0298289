"""Options shared by every command that talks to a tracker (opened by `pipeline.trackers`)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

import click

from agent_harness.pipeline.trackers import open_tracker

F = TypeVar("F", bound=Callable[..., Any])


def checked_repo(ctx: click.Context, param: click.Parameter, value: str | None) -> str | None:
    """`--repo` checked as it is parsed: a typo is a usage error before any token or request."""
    from agent_harness.errors import UsageError
    from agent_harness.tracker.github import check_repo_name

    if value is None:
        return None
    try:
        return check_repo_name(value)
    except UsageError as exc:
        raise click.BadParameter(exc.message.removeprefix("--repo "), ctx, param) from None


def checked_plan_key(ctx: click.Context, param: click.Parameter, value: str | None) -> str | None:
    """`--plan-key` checked as it is parsed: a key no issue marker can hold back is refused."""
    from agent_harness.errors import UsageError
    from agent_harness.plan.model import check_plan_key

    if value is None:
        return None
    try:
        return check_plan_key(value)
    except UsageError as exc:
        raise click.BadParameter(exc.message, ctx, param) from None


def _checked_url(ctx: click.Context, param: click.Parameter, value: str | None) -> str | None:
    from agent_harness.errors import UsageError
    from agent_harness.tracker.github import resolve_api_url

    if value is None:
        return None
    try:
        return resolve_api_url(value, {})
    except UsageError as exc:
        raise click.BadParameter(exc.message.removeprefix("--github-url "), ctx, param) from None


def tracker_options(func: F) -> F:
    func = click.option(
        "--forge",
        type=click.Choice(["local"]),
        help="Use the embedded forge (state in .agent-harness/forge) instead of GitHub.",
    )(func)
    func = click.option(
        "--github-url",
        metavar="URL",
        callback=_checked_url,
        help="API base URL (GitHub Enterprise: https://HOST/api/v3). Default: $GITHUB_API_URL "
        "or https://api.github.com.",
    )(func)
    return func


__all__ = ["checked_repo", "open_tracker", "tracker_options"]
