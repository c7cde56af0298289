"""A running embedded forge plus a PyGithub client pointed at it, for any test suite.

`running_forge(tmp_path)` starts a `ForgeServer` on an ephemeral loopback port and yields the
forge (for faults, accounting, direct helpers), the server (for `api_url`) and a PyGithub
client built to fail fast: no urllib3 retries and no client-side throttling between calls.
The forge knows a second user, COLLABORATOR (`make_client(api_url, COLLABORATOR_TOKEN)`), for
what GitHub lets nobody do to their own pull request, such as approving it.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, NamedTuple

from agent_harness.forge import Forge, ForgeServer

TOKEN = "forge-token"
READ_ONLY_TOKEN = "forge-read-token"
# A second person with push access: who approves what the forge's own user opened.
COLLABORATOR = "forge-reviewer"
COLLABORATOR_TOKEN = "forge-reviewer-token"


class RecordingSleep:
    """A `sleep` that returns at once and remembers what it was asked to wait."""

    def __init__(self) -> None:
        self.calls: list[float] = []

    def __call__(self, seconds: float) -> None:
        self.calls.append(seconds)


class RunningForge(NamedTuple):
    forge: Forge
    server: ForgeServer
    github: Any  # github.Github; typed loosely so that importing this module stays cheap


def make_client(api_url: str, token: str = TOKEN, **options: Any) -> Any:
    """A PyGithub client for the forge: no retries, no sleeping between requests."""
    from github import Auth, Github

    settings: dict[str, Any] = {
        "retry": None,
        "seconds_between_requests": None,
        "seconds_between_writes": None,
        "timeout": 10,
    }
    return Github(auth=Auth.Token(token), base_url=api_url, **(settings | options))


def collaborator_pull(running: RunningForge, pull: Any) -> Any:
    """`pull` (a PyGithub PullRequest) as COLLABORATOR sees it: for reviews its author may not
    give. The client lives as long as the object it returned."""
    client = make_client(running.server.api_url, COLLABORATOR_TOKEN)
    return client.get_repo(pull.base.repo.full_name).get_pull(pull.number)


@contextmanager
def running_forge(
    data_dir: Path,
    *,
    rate_limit: int = 5000,
    clock: Callable[[], float] = time.time,
    sleep: Callable[[float], None] = time.sleep,
    read_only_token: str | None = READ_ONLY_TOKEN,
) -> Iterator[RunningForge]:
    """Start a forge in `data_dir` on 127.0.0.1:<ephemeral>; stop it on exit."""
    forge = Forge(
        Path(data_dir),
        token=TOKEN,
        rate_limit=rate_limit,
        clock=clock,
        sleep=sleep,
        read_only_token=read_only_token,
        collaborators={COLLABORATOR: COLLABORATOR_TOKEN},
    )
    server = ForgeServer(forge, host="127.0.0.1", port=0)
    with server:
        client = make_client(server.api_url)
        try:
            yield RunningForge(forge, server, client)
        finally:
            client.close()
    forge.close()
