"""Options shared by every command that talks to a tracker, and how they become a Tracker."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import click

if TYPE_CHECKING:
    from agent_harness.config import Settings
    from agent_harness.tracker.github import GitHubTracker

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


@contextmanager
def open_tracker(
    repo: str,
    forge: str | None,
    github_url: str | None,
    settings: Settings,
    create: bool,
    *,
    dry_run: bool = False,
    need_history: bool = False,
) -> Iterator[GitHubTracker]:
    """A tracker for `repo`: the local forge or GitHub with a token.

    On the local forge the repository is made on first use, empty, so that the history of the
    user's own clone can be pushed into it; a `dry_run` writes nothing there, not even that.
    With `need_history` (a run, which branches from it) an empty one is refused, saying how
    to push that history.
    """
    from agent_harness.secrets.process import process_env
    from agent_harness.tracker.github import GitHubTracker, resolve_api_url, resolve_token

    tracker_cfg = settings.tracker
    options: dict[str, Any] = {
        "write_spacing_s": tracker_cfg.write_spacing_s,
        "max_rate_wait_s": tracker_cfg.max_rate_wait_s,
        "timeout_s": tracker_cfg.request_timeout_s,
    }
    if forge == "local":
        from agent_harness.forge.local import local_forge

        with local_forge(Path(settings.state_dir), dry_run=dry_run, repo=repo) as local:
            options["write_spacing_s"] = 0.0  # loopback: GitHub's pacing protects nothing here
            tracker = GitHubTracker(repo, local.token, local.api_url, **options)
            try:
                tracker.ensure_repo(create=True, auto_init=False)
                if need_history:
                    _refuse_empty(Path(settings.state_dir), tracker.repo)
                yield tracker
            finally:
                tracker.close()
        return
    env = process_env()
    # Every check that costs nothing comes before the token lookup (which may run `gh`).
    api_url = resolve_api_url(github_url or tracker_cfg.api_url, env)
    secret = tracker_cfg.token.get_secret_value() if tracker_cfg.token else None
    token = secret or resolve_token(env)
    tracker = GitHubTracker(repo, token, api_url, **options)
    try:
        tracker.ensure_repo(create=create)
        yield tracker
    finally:
        tracker.close()


def _refuse_empty(state_dir: Path, repo: str) -> None:
    from agent_harness.errors import UsageError
    from agent_harness.forge.local import describe_repo

    local = describe_repo(state_dir, repo)
    if local.empty:
        raise UsageError(
            f"{repo} on the local forge is empty: push your clone's history to it first "
            f"(git remote add origin {local.clone_url}; git push origin {local.default_branch})"
        )
