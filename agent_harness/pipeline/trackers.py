"""Which tracker a run talks to: GitHub with a token, or the embedded forge on loopback.

Shared by the CLI's commands and the API's supervised pools, so both open a project's tracker
the same way.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from agent_harness.config import Settings
    from agent_harness.forge.local import LocalForge
    from agent_harness.tracker.github import GitHubTracker


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
    serving: LocalForge | None = None,
    only_read: bool = False,
) -> Iterator[GitHubTracker]:
    """A tracker for `repo`: the local forge or GitHub with a token.

    `serving` is a local forge the caller keeps running (a server with several projects on
    it); without it, the local forge runs for the duration of the block.

    On the local forge the repository is made on first use, empty, so that the history of the
    user's own clone can be pushed into it; a `dry_run` writes nothing there, not even that.
    With `need_history` (a run, which branches from it) an empty one is refused, saying how
    to push that history. With `only_read` (reconcile) neither the local forge nor the
    repository is made: one missing is refused.
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
        if github_url:  # taken for the place the work went, while the local forge got it
            from agent_harness.errors import UsageError

            raise UsageError(
                "--github-url and --forge local name two trackers: give one (the local forge "
                "is served at its own address by `agent-harness forge serve`)"
            )
        options["write_spacing_s"] = 0.0  # loopback: GitHub's pacing protects nothing here
        if only_read and serving is None:
            _refuse_missing(Path(settings.state_dir), repo)
        with _local_tracker(repo, settings, options, dry_run, need_history, serving) as tracker:
            yield tracker
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


@contextmanager
def _local_tracker(
    repo: str,
    settings: Settings,
    options: dict[str, Any],
    dry_run: bool,
    need_history: bool,
    serving: LocalForge | None,
) -> Iterator[GitHubTracker]:
    from agent_harness.forge.local import local_forge
    from agent_harness.tracker.github import GitHubTracker

    if dry_run and serving is not None and not serving.holds(repo):
        # Not made there yet (it is made on first use): a dry run reads a throwaway forge, as
        # one without a server does, and so lists every item as new.
        serving = None
    with ExitStack() as stack:
        local = serving or stack.enter_context(
            local_forge(Path(settings.state_dir), dry_run=dry_run, repo=repo)
        )
        tracker = GitHubTracker(repo, local.token, local.api_url, **options)
        try:
            if not (dry_run and serving is not None):
                tracker.ensure_repo(create=True, auto_init=False)
            if need_history:
                _refuse_empty(Path(settings.state_dir), tracker.repo)
            yield tracker
        finally:
            tracker.close()


def _refuse_missing(state_dir: Path, repo: str) -> None:
    """A command that only reads the local forge (reconcile) makes none, nor a repository in
    it: a mistyped name or the wrong folder is said, not answered with "0 transitions"."""
    from agent_harness.errors import UsageError
    from agent_harness.forge.local import DB_FILE, describe_repo, forge_dir

    data_dir = forge_dir(state_dir)
    if not (data_dir / DB_FILE).is_file():
        raise UsageError(
            f"no local forge in {data_dir}: run this where `agent-harness plan … --forge local` "
            "or `run … --forge local` ran (or set state_dir)"
        )
    if not describe_repo(state_dir, repo).exists:
        raise UsageError(f"no repository {repo} on the local forge in {data_dir}")


def _refuse_empty(state_dir: Path, repo: str) -> None:
    from agent_harness.errors import UsageError
    from agent_harness.forge.local import describe_repo

    local = describe_repo(state_dir, repo)
    if local.empty:
        raise UsageError(
            f"{repo} on the local forge is empty: push your clone's history to it first; in "
            f"the clone: git remote add origin {local.clone_url} (or, if it has an origin "
            f"already: git remote set-url origin {local.clone_url}), then git push -u origin "
            "HEAD"
        )
