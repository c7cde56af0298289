"""Options shared by every command that talks to a tracker (opened by `pipeline.trackers`)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

import click

from agent_harness.pipeline.trackers import open_tracker

F = TypeVar("F", bound=Callable[..., Any])


Callback = Callable[[click.Context, click.Parameter, str | None], str | None]


def _usage_checked(check: Callable[[str], str], flag: str = "") -> Callback:
    """A click callback checking an option as it is parsed: a typo is a usage error before any
    token is looked up or request made. `flag` is taken off the front of the check's message,
    as click names the option itself."""

    def callback(ctx: click.Context, param: click.Parameter, value: str | None) -> str | None:
        from agent_harness.errors import UsageError

        if value is None:
            return None
        try:
            return check(value)
        except UsageError as exc:
            raise click.BadParameter(exc.message.removeprefix(flag), ctx, param) from None

    return callback


def _repo_name(value: str) -> str:
    from agent_harness.tracker.github import check_repo_name

    return check_repo_name(value)


def _plan_key(value: str) -> str:  # a key no issue marker can hold back is refused
    from agent_harness.plan.model import check_plan_key

    return check_plan_key(value)


def _api_url(value: str) -> str:
    from agent_harness.tracker.github import resolve_api_url

    return resolve_api_url(value, {})


checked_repo = _usage_checked(_repo_name, "--repo ")
checked_plan_key = _usage_checked(_plan_key)
_checked_url = _usage_checked(_api_url, "--github-url ")


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
