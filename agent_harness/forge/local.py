"""The embedded forge as the offline tracker: started in-process, state under `.agent-harness/`.

`--forge local` and `demo` use it. The token is random per state directory and kept in a file
only the user can read, so a forge left running is not an open door even on loopback.

Each data directory also records the address its web pages live at (`address`): links the
harness prints point there, and `agent-harness forge serve --data DIR` listens there again
after the command that printed them has ended. A repository made here starts empty, so the
history of the user's own clone can be pushed into it as it is.

A dry run writes nothing: against a repository the data directory already holds it reads the
real state, and otherwise it works on a throwaway forge in a temporary directory.
"""

from __future__ import annotations

import json
import os
import secrets
import socket
import tempfile
import urllib.parse
import urllib.request
import zlib
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from agent_harness.errors import HarnessError, UsageError
from agent_harness.git.ignore import keep_out_of_git

if TYPE_CHECKING:
    from agent_harness.forge.core import Forge

DB_FILE = "forge.sqlite3"
TOKEN_FILE = "token"
ADDRESS_FILE = "address"
HOST = "127.0.0.1"
# Ports tried first for a data directory's pages: below Linux's ephemeral range, so a client
# connection is unlikely to be holding one when the pages are served again.
_PORT_BASE, _PORT_SPAN, _PORT_TRIES = 20000, 10000, 20


@dataclass(frozen=True)
class LocalForge:
    api_url: str
    token: str
    data_dir: Path
    web_url: str | None = None  # where its pages are served for good; None on a scratch forge
    scratch: bool = False  # a dry run's throwaway forge, gone when the block ends
    forge: Forge | None = None  # the forge itself, in this process (for its local CI)

    def holds(self, repo: str) -> bool:
        """Whether the repository `repo` (OWNER/NAME) is on this forge (True when the forge
        runs elsewhere: it cannot be asked here)."""
        return self.forge is None or _holds(self.forge, repo)


@dataclass(frozen=True)
class LocalRepo:
    """What a user needs to know about one repository of the local forge."""

    full_name: str
    data_dir: Path
    clone_url: str
    default_branch: str
    exists: bool
    empty: bool
    web_url: str | None

    @property
    def page_url(self) -> str | None:
        return f"{self.web_url}/_html/{self.full_name}" if self.web_url else None

    def as_json(self) -> dict[str, object]:
        return {
            "repo": self.full_name,
            "data_dir": str(self.data_dir),
            "clone_url": self.clone_url,
            "default_branch": self.default_branch,
            "exists": self.exists,
            "empty": self.empty,
            "web_url": self.web_url,
            "page_url": self.page_url,
        }


def forge_dir(state_dir: Path) -> Path:
    return Path(state_dir) / "forge"


def read_token(data_dir: Path) -> str | None:
    path = Path(data_dir) / TOKEN_FILE
    return path.read_text(encoding="utf-8").strip() if path.is_file() else None


def _token(data_dir: Path) -> str:
    token = read_token(data_dir)
    if token:
        return token
    token = "local-" + secrets.token_hex(16)
    fd = os.open(data_dir / TOKEN_FILE, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as handle:
        handle.write(token + "\n")
    return token


def read_web_address(data_dir: Path) -> str | None:
    """The address recorded for the pages of this data directory, if one was."""
    path = Path(data_dir) / ADDRESS_FILE
    if not path.is_file():
        return None
    return path.read_text(encoding="utf-8").strip() or None


def moved_link(url: str, data_dir: Path) -> str:
    """A link to these pages on the address they are served at now. Where another program
    took the recorded port, the pages moved to another: a link recorded before would open
    that program (or nothing). Only a loopback link is moved."""
    now = read_web_address(data_dir)
    old = urllib.parse.urlsplit(url)
    if now is None or old.hostname not in ("127.0.0.1", "::1", "localhost"):
        return url
    new = urllib.parse.urlsplit(now)
    return urllib.parse.urlunsplit((new.scheme, new.netloc, old.path, old.query, old.fragment))


def address_port(url: str) -> int | None:
    return urllib.parse.urlsplit(url).port


def _web_address(data_dir: Path, token: str) -> str:
    """Where this data directory's pages are served for good: as recorded, unless another
    program holds that port now (the links printed would open it), and then a port chosen
    again, and recorded."""
    known = read_web_address(data_dir)
    if known and not _held_by_another(known, token):
        return known
    url = f"http://{HOST}:{_choose_port(data_dir)}"
    (data_dir / ADDRESS_FILE).write_text(url + "\n", encoding="utf-8")
    return url


def _held_by_another(url: str, token: str) -> bool:
    """Whether the port of `url` is held now by something that is not this forge (which, as
    `forge serve`, answers its own token with its user)."""
    port = address_port(url)
    if port is None or _free(port):
        return False
    # Held: by this forge's `forge serve`, or by another program.
    return not answers_as_this_forge(url, token)


def answers_as_this_forge(url: str, token: str) -> bool:
    """Whether a forge that takes `token` answers at `url` (its `/user` names a login)."""
    request = urllib.request.Request(f"{url}/user", headers={"Authorization": f"token {token}"})
    try:
        with urllib.request.urlopen(request, timeout=2) as answer:
            said = json.loads(answer.read(65_536) or b"null")
    except (OSError, ValueError):
        return False
    return isinstance(said, dict) and isinstance(said.get("login"), str)


def _free(port: int) -> bool:
    """Whether nothing listens on `port` of the loopback address now. Connections of a server
    killed a moment ago (in TIME_WAIT) do not count: the forge's server binds past them, as
    this probe does, so the port recorded for it stays its own."""
    with socket.socket() as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind((HOST, port))
        except OSError:
            return False
        return True


def _choose_port(data_dir: Path) -> int:
    """A port free now, the same first guess for the same directory every time."""
    start = _PORT_BASE + zlib.crc32(os.fsencode(data_dir.resolve())) % _PORT_SPAN
    for port in range(start, start + _PORT_TRIES):
        if _free(port):
            return port
    with socket.socket() as probe:
        probe.bind((HOST, 0))
        return int(probe.getsockname()[1])


def _open(data_dir: Path, token: str) -> Forge:
    from agent_harness.forge import Forge, ForgeError

    try:
        return Forge(data_dir, token=token)
    except (OSError, ForgeError) as exc:
        raise HarnessError(f"cannot start the local forge in {data_dir}: {exc}") from None


@contextmanager
def _serving(forge: Forge, port: int) -> Iterator[str]:
    """Serve `forge` on `port`, or on any port when that one is taken; yields the API URL."""
    from agent_harness.forge import ForgeAddressError, ForgeServer

    server = ForgeServer(forge, host=HOST, port=port)
    try:
        server.bind()
    except ForgeAddressError:  # e.g. `forge serve` shows the pages already: any port will do
        server = ForgeServer(forge, host=HOST, port=0)
    with server:
        yield server.api_url


@contextmanager
def local_forge(
    state_dir: Path, *, dry_run: bool = False, repo: str | None = None
) -> Iterator[LocalForge]:
    """Run the embedded forge on loopback for the duration of the block.

    With `dry_run`, nothing is written: the real data is read when it holds `repo`, and a
    throwaway forge in a temporary directory stands in for it otherwise.
    """
    data_dir = forge_dir(state_dir)
    if dry_run:
        with _dry_run_forge(data_dir, repo) as local:
            yield local
        return
    token, web_url = _made(state_dir, web=True)
    forge = _open(data_dir, token)
    forge.web_url = web_url
    try:
        with _serving(forge, address_port(web_url) or 0) as api_url:
            yield LocalForge(api_url, token, data_dir, web_url, forge=forge)
    finally:
        forge.close()


def _made(state_dir: Path, *, web: bool) -> tuple[str, str]:
    """The forge's data folder of `state_dir`, made if need be, and its token; with `web`, the
    address its pages are served at too ("" without)."""
    data_dir = forge_dir(state_dir)
    try:
        fresh = not data_dir.exists()
        data_dir.mkdir(parents=True, exist_ok=True)
        if fresh:  # its token and bare repositories, made inside a clone: not for `git add`
            keep_out_of_git(state_dir)
        token = _token(data_dir)
        return token, _web_address(data_dir, token) if web else ""
    except OSError as exc:
        raise HarnessError(f"cannot start the local forge in {data_dir}: {exc}") from None


@contextmanager
def _dry_run_forge(data_dir: Path, repo: str | None) -> Iterator[LocalForge]:
    if (data_dir / DB_FILE).is_file():
        token = read_token(data_dir) or "dry-run-" + secrets.token_hex(8)
        forge = _open(data_dir, token)
        try:
            if repo is None or _holds(forge, repo):
                forge.web_url = read_web_address(data_dir)
                with _serving(forge, 0) as api_url:
                    yield LocalForge(api_url, token, data_dir, forge.web_url)
                return
        finally:
            forge.close()
    with tempfile.TemporaryDirectory(prefix="agent-harness-dry-run-") as scratch:
        token = "dry-run-" + secrets.token_hex(8)
        forge = _open(Path(scratch) / "forge", token)
        try:
            with _serving(forge, 0) as api_url:
                yield LocalForge(api_url, token, data_dir, None, scratch=True)
        finally:
            forge.close()


def _holds(forge: Forge, repo: str) -> bool:
    owner, _, name = repo.partition("/")
    with forge.db.transaction():
        return forge.repo_row(owner, name) is not None


def split_repo(repo: str) -> tuple[str, str]:
    owner, sep, name = repo.partition("/")
    if not sep or not owner or not name or "/" in name:
        raise UsageError(f"REPO must be OWNER/NAME, not {repo!r}")
    return owner, name


@contextmanager
def existing_forge(data_dir: Path) -> Iterator[Forge]:
    """The forge of a data directory that already holds one, opened without a server."""
    if not (Path(data_dir) / DB_FILE).is_file():
        raise UsageError(
            f"no local forge in {data_dir}: `agent-harness plan PLAN.md --repo OWNER/NAME "
            "--forge local` makes one (or name another with --data)"
        )
    forge = _open(Path(data_dir), read_token(data_dir) or "forge-token")
    forge.web_url = read_web_address(data_dir)
    try:
        yield forge
    finally:
        forge.close()


def state_dir_of(repository: Path) -> Path | None:
    """The state folder whose local forge holds the bare repository at `repository`
    (`<state>/forge/git/<owner>/<name>.git`); None when it is no local forge's."""
    parts = repository.resolve().parents
    if len(parts) < 4 or parts[1].name != "git" or not repository.name.endswith(".git"):
        return None
    state_dir = parts[3]
    return state_dir if (forge_dir(state_dir) / DB_FILE).is_file() else None


def make_repo(state_dir: Path, repo: str) -> None:
    """Make `repo`, empty, on the local forge of `state_dir` (and the forge, the first time)
    unless it is there: as a run's tracker would a moment later, but before the run tells a
    clone with no origin to push to it, so the push it asks for answers."""
    from agent_harness.forge import ForgeError

    owner, name = split_repo(repo)
    token, _ = _made(state_dir, web=False)
    forge = _open(forge_dir(state_dir), token)
    try:
        if not _holds(forge, repo):
            with suppress(ForgeError):  # made by another process meanwhile
                forge.create_repo(owner, name, auto_init=False)
    finally:
        forge.close()


def describe_repo(state_dir: Path, repo: str) -> LocalRepo:
    """Where `repo` of the local forge clones from and whether it holds any history yet,
    read without writing anything (a repository not made yet is described as it would be)."""
    from agent_harness.forge.core import bare_repo_path
    from agent_harness.forge.gitrepo import BareRepo

    data_dir = forge_dir(state_dir)
    owner, name = split_repo(repo)
    path = bare_repo_path(data_dir, owner, name)
    facts = LocalRepo(
        full_name=repo,
        data_dir=data_dir,
        clone_url=path.resolve().as_uri(),
        default_branch="main",
        exists=False,
        empty=True,
        web_url=read_web_address(data_dir),
    )
    if not (data_dir / DB_FILE).is_file():
        return facts
    with existing_forge(data_dir) as forge, forge.db.transaction():
        row = forge.repo_row(owner, name)
        if row is None:
            return facts
        return LocalRepo(
            full_name=repo,
            data_dir=data_dir,
            clone_url=facts.clone_url,
            default_branch=str(row["default_branch"]),
            exists=True,
            empty=not BareRepo(path).branches(),
            web_url=facts.web_url,
        )
