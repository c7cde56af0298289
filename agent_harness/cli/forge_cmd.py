"""`agent-harness forge`: serve the embedded forge, and merge or close on it by hand."""

from __future__ import annotations

import signal
import sys
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import click

from agent_harness.cli.output import from_env, host_option, print_json

F = TypeVar("F", bound=Callable[..., Any])
DEFAULT_PORT = 8080
DEFAULT_TOKEN = "forge-token"


# An issue or pull request number: GitHub's are 32-bit, and a bigger one can name nothing.
_NUMBER = click.IntRange(1, 2**31 - 1)


def _checked_repo(repo: str) -> str:
    """REPO as GitHub would spell it, or one line saying what is wrong with it."""
    from agent_harness.errors import UsageError
    from agent_harness.tracker.github import check_repo_name

    try:
        return check_repo_name(repo)
    except UsageError as exc:
        raise UsageError("REPO " + exc.message.removeprefix("--repo ")) from None


def _data_option(help_text: str) -> Callable[[F], F]:
    return click.option(
        "--data",
        "data_dir",
        type=click.Path(path_type=Path),
        default=None,
        help=help_text + " Default: the local forge of --forge local (.agent-harness/forge).",
    )


def _resolve_data(data_dir: Path | None) -> Path:
    if data_dir is not None:
        return data_dir
    from agent_harness.config import load_settings
    from agent_harness.forge.local import forge_dir

    return forge_dir(Path(load_settings().settings.state_dir))


@click.group(
    epilog="""\b
Examples:
  agent-harness forge serve --data .agent-harness/forge   # the pages of --forge local, again
  agent-harness forge merge me/app 2                      # press "Merge" on pull request 2
  agent-harness forge close me/app 1                      # close issue (or pull request) 1
"""
)
def forge() -> None:
    """The embedded GitHub-compatible forge (offline issues, PRs and git hosting)."""


@forge.command(
    epilog="""\b
Examples:
  agent-harness forge serve --data .forge --port 8080
  agent-harness forge serve --data .agent-harness/forge     # where its links point
  GITHUB_API_URL=http://127.0.0.1:8080 GITHUB_TOKEN=forge-token \\
      agent-harness plan PLAN.md --repo me/app     # any GitHub client, pointed at it
  agent-harness forge serve --ci 'python -m unittest'   # a check run on each PR head
"""
)
@_data_option("Directory for the database and bare git repositories.")
@host_option
@click.option(
    "--port",
    type=click.IntRange(0, 65535),
    default=None,
    help="Port to listen on (0 = any). Default: the port recorded in DATA by --forge local, "
    f"which the links it printed point at; else {DEFAULT_PORT}.",
)
@click.option(
    "--token",
    default=None,
    callback=from_env("FORGE_TOKEN"),
    help="Token clients must send (Authorization: token ...); env FORGE_TOKEN. Default: the "
    f"token --forge local keeps in DATA/token, else {DEFAULT_TOKEN}.",
)
@click.option("--read-only-token", default=None, help="An extra token that may only read.")
@click.option(
    "--collaborator",
    "collaborators",
    multiple=True,
    metavar="LOGIN=TOKEN",
    callback=lambda _ctx, _param, value: _collaborators(value),
    help="Another user with push access, who may approve or request changes on pull requests "
    "the token's user opened (their author may not, as on GitHub). Repeatable.",
)
@click.option(
    "--rate-limit",
    default=5000,
    show_default=True,
    type=click.IntRange(1, 10**9),
    help="Requests per token per hour.",
)
@click.option(
    "--ci",
    "ci_command",
    metavar="COMMAND",
    help="Run COMMAND (in a checkout of the head) on each open pull request's new head and "
    "post its result as the check run `local-ci`.",
)
def serve(
    data_dir: Path | None,
    host: str,
    port: int | None,
    token: str | None,
    read_only_token: str | None,
    collaborators: dict[str, str],
    rate_limit: int,
    ci_command: str | None,
) -> int:
    """Serve the GitHub REST subset and its web pages until Ctrl-C.

    Repositories live in DATA/git as bare repos. Point PyGithub at it with
    Github(auth=Auth.Token(TOKEN), base_url=URL); clone_url of a repository is a file:// URL
    that git clone and git push use directly. Read-only pages of every repository, issue and
    pull request are under URL/_html/ (no token needed; loopback only by default).
    """
    from agent_harness.forge import Forge, ForgeServer
    from agent_harness.forge.local import DB_FILE, address_port, read_token, read_web_address

    data = _resolve_data(data_dir)
    recorded = read_web_address(data)
    if port is None:
        port = (address_port(recorded) if recorded else None) or DEFAULT_PORT
    kept = read_token(data)
    token = token or kept or DEFAULT_TOKEN
    made = not (data / DB_FILE).exists()  # a mistyped --data serves a new, empty forge
    hub = Forge(
        data,
        token=token,
        rate_limit=rate_limit,
        read_only_token=read_only_token,
        collaborators=collaborators,
    )
    server = ForgeServer(hub, host=host, port=port)
    _bind(server, data, token)
    ci = None
    restore = _stop_on_signals()  # before it says where it serves: it may be stopped at once
    try:
        _say_where(server.api_url, data, token, kept, collaborators, made)
        if ci_command:
            from agent_harness.forge.ci import LocalCI

            ci = LocalCI(hub, ci_command)
            ci.start()
            click.echo(f"  CI: `{ci_command}` on each pull request head, as check run local-ci")
        click.echo("  Ctrl-C to stop")
        sys.stdout.flush()
        server.serve_forever()
    except KeyboardInterrupt:
        click.echo("forge stopped")
    finally:
        if ci is not None:
            ci.stop()
        hub.close()
        restore()
    return 0


def _stop_on_signals() -> Callable[[], None]:
    """Make Ctrl-C and a plain `kill` raise KeyboardInterrupt, even when a script started us
    in the background (such a shell starts its jobs with SIGINT ignored); returns what puts
    the handlers found back. Only the main thread may set them: elsewhere, nothing is set."""
    before = {}
    if threading.current_thread() is threading.main_thread():
        for number in (signal.SIGINT, signal.SIGTERM):
            before[number] = signal.signal(number, signal.default_int_handler)

    def restore() -> None:
        for number, handler in before.items():
            signal.signal(number, handler)

    return restore


def _bind(server: Any, data: Path, token: str) -> None:
    """Listen where asked; a port this very forge is served on already is said so."""
    from agent_harness.errors import UsageError
    from agent_harness.forge.errors import ForgeAddressError
    from agent_harness.forge.local import answers_as_this_forge

    try:
        server.bind()
    except ForgeAddressError as exc:
        url = f"http://{exc.host}:{exc.port}"
        if answers_as_this_forge(url, token):
            raise UsageError(
                f"the forge in {data.resolve()} is served at {url} already; stop that one "
                "first, or give this one another --port"
            ) from None
        raise


def _say_where(
    url: str,
    data: Path,
    token: str,
    kept: str | None,
    collaborators: dict[str, str],
    made: bool,
) -> None:
    """Where the forge answers, and how a client reaches it; `made`: its data is new."""
    from agent_harness.plan.model import shell_word

    new = ", made just now: no repositories yet" if made else ""
    click.echo(f"forge serving {url} (data: {data.resolve()}{new})")
    # A token of the user's own is never printed: the well-known default is, and the local
    # forge's is named by the file that holds it. Collaborators are named, their tokens never.
    if token == DEFAULT_TOKEN:
        shown, in_python = DEFAULT_TOKEN, repr(DEFAULT_TOKEN)
    elif token == kept:
        shown, in_python = (
            f'"$(cat {shell_word(str(data / "token"))})"',
            "<the token in DATA/token>",
        )
    else:
        shown = in_python = "<your token>"
    click.echo(f"  export GITHUB_API_URL={url} GITHUB_TOKEN={shown}")
    click.echo(f"  PyGithub: Github(auth=Auth.Token({in_python}), base_url={url!r})")
    click.echo(f"  pages: {url}/_html/")
    if collaborators:
        click.echo(f"  collaborators: {', '.join(sorted(collaborators))}")


def _collaborators(given: tuple[str, ...]) -> dict[str, str]:
    out: dict[str, str] = {}
    for spec in given:
        login, sep, token = spec.partition("=")
        if not sep:  # the value may be a token: never echoed
            raise click.BadParameter(
                "expects LOGIN=TOKEN, with no '=' given", param_hint="--collaborator"
            )
        if not login or not token or any(c.isspace() for c in login):
            raise click.BadParameter(
                "needs LOGIN=TOKEN: a login without spaces, then a token",
                param_hint="--collaborator",
            )
        if login in out:
            raise click.BadParameter(f"{login} is named twice", param_hint="--collaborator")
        out[login] = token
    return out


@forge.command(
    epilog="""\b
Examples:
  agent-harness forge merge me/app 2
  agent-harness forge merge me/app 2 --method squash --json
  agent-harness forge merge octo/tally 7 --data ./forge-data
"""
)
@click.argument("repo", metavar="REPO")
@click.argument("number", type=_NUMBER, metavar="N")
@click.option(
    "--method",
    type=click.Choice(["merge", "squash", "rebase"]),
    default="merge",
    show_default=True,
    help="A merge commit, one squashed commit, or the commits rebased onto the base.",
)
@_data_option("The forge's data directory.")
@click.option("--json", "as_json", is_flag=True, help="Print the result as JSON.")
def merge(repo: str, number: int, method: str, data_dir: Path | None, as_json: bool) -> int:
    """Merge pull request N of REPO (OWNER/NAME), as its "Merge" button would.

    The merge is made in the forge's bare repository; pull it into your clone afterwards
    (`git pull origin BRANCH`, the repository's default branch), and `agent-harness reconcile
    --repo REPO --forge local` records it. A pull request that conflicts with its base, or is
    already merged or closed, is refused (exit 1).
    """
    from agent_harness.forge.by_hand import merge_pull

    done = merge_pull(_resolve_data(data_dir), _checked_repo(repo), number, method)
    if as_json:
        print_json(done.as_json())
    else:
        click.echo(
            f'merged {done.repo}#{done.number} "{done.title}" ({done.head} into {done.base}, '
            f"{done.method}): commit {done.sha[:12]}"
        )
    return 0


@forge.command(
    epilog="""\b
Examples:
  agent-harness forge close me/app 1          # an issue: closed as completed
  agent-harness forge close me/app 2 --json   # a pull request: closed, not merged
"""
)
@click.argument("repo", metavar="REPO")
@click.argument("number", type=_NUMBER, metavar="N")
@_data_option("The forge's data directory.")
@click.option("--json", "as_json", is_flag=True, help="Print the result as JSON.")
def close(repo: str, number: int, data_dir: Path | None, as_json: bool) -> int:
    """Close issue or pull request N of REPO (OWNER/NAME) without merging anything."""
    from agent_harness.forge.by_hand import close as close_it

    done = close_it(_resolve_data(data_dir), _checked_repo(repo), number)
    if as_json:
        print_json(done.as_json())
    elif done.is_pull:
        click.echo(f"closed pull request {done.repo}#{done.number} (not merged)")
    else:
        click.echo(f"closed issue {done.repo}#{done.number}")
    return 0
