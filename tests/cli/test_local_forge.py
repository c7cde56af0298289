"""`--forge local` with a user's own repository: the repository the forge makes is empty and the
command says which `origin` to push the user's history to; a dry run writes nothing; a pull
request is merged or closed by hand with `agent-harness forge merge|close`."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from github import UnknownObjectException

from agent_harness.cli import main
from agent_harness.forge.local import local_forge
from agent_harness.store.database import Store
from agent_harness.store.hostlock import held_by_this_host, plan_sync_lock
from agent_harness.testing.forge import make_client
from tests.shared.stores import Engine, cli_url

pytestmark = pytest.mark.integration

PLAN = "### T1: Count words\n\ncheck: `true`\n"
GIT_ENV = {
    **os.environ,
    "GIT_AUTHOR_NAME": "Dee",
    "GIT_AUTHOR_EMAIL": "dee@example.com",
    "GIT_COMMITTER_NAME": "Dee",
    "GIT_COMMITTER_EMAIL": "dee@example.com",
}


def git(cwd: Path, *args: str) -> str:
    proc = subprocess.run(
        ["git", *args], cwd=cwd, env=GIT_ENV, capture_output=True, text=True, check=False
    )
    assert proc.returncode == 0, proc.stderr
    return proc.stdout.strip()


@pytest.fixture(scope="module")
def project(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The user's own project with two commits on main, made once; each test has a copy."""
    app = tmp_path_factory.mktemp("project") / "app"
    app.mkdir()
    git(app, "init", "-q", "--initial-branch=main")
    (app / "README.md").write_text("# app\n")
    git(app, "add", "README.md")
    git(app, "commit", "-q", "-m", "first")
    (app / "app.py").write_text("print('hi')\n")
    git(app, "add", "app.py")
    git(app, "commit", "-q", "-m", "second")
    return app


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, project: Path) -> Path:
    """A user's directory: the plan, and their own project with two commits on main."""
    for name in [n for n in os.environ if n.startswith("AGENT_HARNESS_")]:
        monkeypatch.delenv(name)
    monkeypatch.chdir(tmp_path)
    (tmp_path / "PLAN.md").write_text(PLAN)
    shutil.copytree(project, tmp_path / "app", symlinks=True)
    return tmp_path


def snapshot(root: Path) -> dict[str, str]:
    """Every file under `root` with a hash of its bytes."""
    return {
        str(path.relative_to(root)): hashlib.sha256(path.read_bytes()).hexdigest()
        for path in sorted(root.rglob("*"))
        if path.is_file()
    }


def test_plan_makes_an_empty_repository_and_says_which_origin_takes_the_users_history(
    home: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["plan", "PLAN.md", "--repo", "me/app", "--forge", "local"]) == 0
    err = capsys.readouterr().err
    lines = [line.strip() for line in err.splitlines()]
    add = next(line for line in lines if line.startswith("git remote add origin "))
    assert add.split()[-1].startswith("file://")
    assert "git push -u origin HEAD" in lines

    app = home / "app"
    git(app, "branch", "-m", "master")  # the hint holds for a clone whose branch is not main
    git(app, *add.split()[1:])
    push = next(line for line in lines if line.startswith("git push -u origin "))
    git(app, *push.split()[1:])  # the user's own history goes in as it is, as the hint says

    bare = Path(add.split()[-1].removeprefix("file://"))
    assert git(bare, "log", "--format=%s", "master").splitlines() == ["second", "first"]
    # A clone that has an origin already is told the command that works there too.
    other = next(line for line in lines if "git remote set-url origin " in line)
    set_url = other[other.index("git remote set-url") :].rstrip(")").split()
    git(app, *set_url[1:])
    assert git(app, "remote", "get-url", "origin") == add.split()[-1]


def test_the_state_a_command_makes_inside_a_clone_is_kept_out_of_its_git_status(
    home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # `plan --forge local` run in the clone left `.agent-harness/` (the forge's token, a
    # whole bare repository, the database) for the next `git add -A` to commit.
    app = home / "app"
    (app / "PLAN.md").write_text(PLAN)
    git(app, "add", "PLAN.md")
    git(app, "commit", "-q", "-m", "plan")
    monkeypatch.chdir(app)
    assert main(["plan", "PLAN.md", "--repo", "me/app", "--forge", "local"]) == 0
    assert (app / ".agent-harness" / "forge").is_dir()
    assert git(app, "status", "--porcelain", "--untracked-files=all") == ""
    assert (app / ".gitignore").exists() is False  # the user's own file is not touched


def test_pages_recorded_on_a_port_another_program_holds_move_to_one_that_answers(
    home: Path,
) -> None:
    # The run served on another port, but every link it printed named the recorded one,
    # where another program answered.
    import http.server

    from agent_harness.forge.local import read_web_address

    with local_forge(home / ".agent-harness") as first:
        recorded = first.web_url
    assert recorded is not None
    port = int(recorded.rsplit(":", 1)[1])
    squatter = http.server.HTTPServer(("127.0.0.1", port), http.server.SimpleHTTPRequestHandler)
    try:
        with local_forge(home / ".agent-harness") as second:
            assert second.web_url != recorded
            assert second.web_url == second.api_url  # this run serves them, where they say
            data = home / ".agent-harness" / "forge"
            assert read_web_address(data) == second.web_url  # and `forge serve` will too
    finally:
        squatter.server_close()


def test_the_recorded_port_stays_after_its_server_was_killed_mid_connection(home: Path) -> None:
    # A killed `forge serve` leaves its closed connections in TIME_WAIT on the port: read as
    # "held by another program", the port moved on every restart, and every link printed
    # before (in pull requests, in the run's report) answered no more.
    import socket

    from agent_harness.forge.local import read_web_address

    with local_forge(home / ".agent-harness") as first:
        recorded = first.web_url
    assert recorded is not None
    port = int(recorded.rsplit(":", 1)[1])
    with socket.socket() as server:
        server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        server.bind(("127.0.0.1", port))
        server.listen()
        client = socket.create_connection(("127.0.0.1", port))
        accepted, _ = server.accept()
        accepted.close()  # the server's side closes first: its end waits in TIME_WAIT
        client.close()
    with local_forge(home / ".agent-harness") as second:
        assert second.web_url == recorded
    assert read_web_address(home / ".agent-harness" / "forge") == recorded


def test_once_pushed_plan_names_the_clone_url_and_the_pages(
    home: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["plan", "PLAN.md", "--repo", "me/app", "--forge", "local", "--json"]) == 0
    facts = json.loads(capsys.readouterr().out)["local_forge"]
    assert facts["empty"] is True
    git(home / "app", "remote", "add", "origin", facts["clone_url"])
    git(home / "app", "push", "-q", "origin", "main")

    assert main(["plan", "PLAN.md", "--repo", "me/app", "--forge", "local"]) == 0
    err = capsys.readouterr().err
    assert f"local forge: me/app clones from {facts['clone_url']}" in err
    assert "git remote add" not in err
    assert "agent-harness forge serve --data .agent-harness/forge" in err
    assert f"{facts['web_url']}/_html/me/app" in err


def test_a_dry_run_on_a_new_repository_writes_nothing_anywhere(
    home: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    before = snapshot(home)
    code = main(["plan", "PLAN.md", "--repo", "me/app", "--forge", "local", "--dry-run"])
    captured = capsys.readouterr()
    assert code == 0, captured.err
    assert "would be created" in captured.out
    assert "me/app would be created" in captured.err
    assert not (home / ".agent-harness").exists()
    assert snapshot(home) == before


def test_a_dry_run_against_an_existing_local_forge_changes_none_of_its_files(
    home: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["plan", "PLAN.md", "--repo", "me/app", "--forge", "local"]) == 0
    (home / "PLAN.md").write_text(PLAN + "\n### T2: Count lines\n\ncheck: `true`\n")
    capsys.readouterr()
    before = snapshot(home / ".agent-harness")

    code = main(["plan", "PLAN.md", "--repo", "me/app", "--forge", "local", "--dry-run"])
    out = capsys.readouterr().out

    assert code == 0
    assert "T2" in out and "would be created" in out
    assert snapshot(home / ".agent-harness") == before


def test_a_reconcile_dry_run_writes_nothing_anywhere(
    home: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    before = snapshot(home)
    code = main(["reconcile", "--repo", "me/app", "--forge", "local", "--dry-run"])
    captured = capsys.readouterr()
    assert code == 2  # no forge here to read: said, as without --dry-run
    assert captured.err.startswith("error: no local forge in .agent-harness/forge")
    assert not (home / ".agent-harness").exists()  # neither a forge nor a database
    assert snapshot(home) == before
    assert main(["plan", "PLAN.md", "--repo", "me/app", "--forge", "local"]) == 0
    capsys.readouterr()
    before = snapshot(home)
    assert main(["reconcile", "--repo", "me/app", "--forge", "local", "--dry-run"]) == 0
    assert "me/app: would record 0 transition(s)" in capsys.readouterr().out
    assert snapshot(home) == before


# -- forge merge / close ------------------------------------------------------------------------
@pytest.fixture
def pull(home: Path) -> Iterator[int]:
    """The user's repo on the local forge with issue #1 (from the plan) and pull request #2."""
    assert main(["plan", "PLAN.md", "--repo", "me/app", "--forge", "local"]) == 0
    app = home / "app"
    with local_forge(home / ".agent-harness") as forge:
        client = make_client(forge.api_url, forge.token)
        remote = client.get_repo("me/app")
        git(app, "remote", "add", "origin", remote.clone_url)
        git(app, "push", "-q", "origin", "main")
        git(app, "checkout", "-q", "-b", "feature")
        (app / "words.py").write_text("WORDS = 2\n")
        git(app, "add", "words.py")
        git(app, "commit", "-q", "-m", "Count words")
        git(app, "push", "-q", "origin", "feature")
        git(app, "checkout", "-q", "main")
        number = remote.create_pull(title="Count words", body="", head="feature", base="main")
        yield int(number.number)
        client.close()


def forge_json(home: Path, path: str) -> dict[str, object]:
    with local_forge(home / ".agent-harness") as forge:
        client = make_client(forge.api_url, forge.token)
        try:
            status, _, body = client.requester.requestJson("GET", path)
        finally:
            client.close()
    assert status == 200
    data = json.loads(body)
    assert isinstance(data, dict)
    return data


def test_forge_merge_is_a_real_merge_in_the_bare_repository(
    home: Path, pull: int, capsys: pytest.CaptureFixture[str]
) -> None:
    capsys.readouterr()
    assert main(["forge", "merge", "me/app", str(pull)]) == 0
    out = capsys.readouterr().out
    assert out.startswith(f"merged me/app#{pull} ") and "(feature into main, merge): commit " in out
    sha = out.strip().rsplit(" ", 1)[-1]  # the merge commit, not the pull request's title

    app = home / "app"
    git(app, "pull", "-q", "origin", "main")
    parents = git(app, "log", "-1", "--format=%P").split()
    assert len(parents) == 2 and parents[1] == git(app, "rev-parse", "feature")
    assert git(app, "log", "-1", "--format=%s") == f"Merge pull request #{pull} from me/feature"
    assert git(app, "rev-parse", "HEAD").startswith(sha)
    assert (app / "words.py").read_text() == "WORDS = 2\n"
    data = forge_json(home, f"/repos/me/app/pulls/{pull}")
    assert data["merged"] is True and data["state"] == "closed"


def test_forge_merge_json_for_scripts(
    home: Path, pull: int, capsys: pytest.CaptureFixture[str]
) -> None:
    capsys.readouterr()
    assert main(["forge", "merge", "me/app", str(pull), "--method", "squash", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["merged"] is True and data["number"] == pull and data["method"] == "squash"
    assert len(data["sha"]) == 40


def test_forge_close_closes_an_issue_or_a_pull_request_without_merging(
    home: Path, pull: int, capsys: pytest.CaptureFixture[str]
) -> None:
    capsys.readouterr()
    assert main(["forge", "close", "me/app", "1"]) == 0
    assert capsys.readouterr().out.strip() == "closed issue me/app#1"
    assert main(["forge", "close", "me/app", str(pull)]) == 0
    assert capsys.readouterr().out.strip() == f"closed pull request me/app#{pull} (not merged)"
    assert forge_json(home, "/repos/me/app/issues/1")["state"] == "closed"
    data = forge_json(home, f"/repos/me/app/pulls/{pull}")
    assert data["state"] == "closed" and data["merged"] is False


@pytest.mark.parametrize(
    ("argv", "code", "message"),
    [
        (["merge", "me/app", "99"], 2, "me/app has no pull request #99"),
        (["merge", "me/app", "1"], 2, "me/app#1 is an issue, not a pull request"),
        (["close", "me/app", "99"], 2, "me/app has no issue or pull request #99"),
        (["merge", "me/nothing", "1"], 2, "no repository me/nothing on the local forge"),
        (["merge", "me-app", "1"], 2, "REPO 'me-app' must be OWNER/NAME"),
        (["close", "../x", "1"], 2, "REPO '../x' has owner '..'"),
        (["close", "me/\udcffapp", "1"], 2, "REPO 'me/\\xffapp' has name"),
    ],
)
def test_what_cannot_be_merged_or_closed_is_one_line(
    home: Path,
    pull: int,
    capsys: pytest.CaptureFixture[str],
    argv: list[str],
    code: int,
    message: str,
) -> None:
    capsys.readouterr()
    assert main(["forge", *argv]) == code
    err = capsys.readouterr().err
    assert message in err and err.count("\n") == 1 and "Traceback" not in err


def test_merging_twice_or_a_closed_one_is_refused(
    home: Path, pull: int, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["forge", "merge", "me/app", str(pull)]) == 0
    capsys.readouterr()
    assert main(["forge", "merge", "me/app", str(pull)]) == 1
    assert capsys.readouterr().err.strip() == f"error: me/app#{pull} is already merged"
    assert main(["forge", "close", "me/app", str(pull)]) == 1
    assert capsys.readouterr().err.strip() == f"error: me/app#{pull} is already merged"


def test_a_conflicting_pull_request_is_not_merged(
    home: Path, pull: int, capsys: pytest.CaptureFixture[str]
) -> None:
    app = home / "app"
    (app / "words.py").write_text("WORDS = 3\n")
    git(app, "add", "words.py")
    git(app, "commit", "-q", "-m", "Words on main")
    git(app, "push", "-q", "origin", "main")
    capsys.readouterr()
    assert main(["forge", "merge", "me/app", str(pull)]) == 1
    err = capsys.readouterr().err.strip()
    assert err == f"error: me/app#{pull} conflicts with main; merge main into feature first"


def test_no_local_forge_yet_is_one_line(home: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["forge", "merge", "me/app", "1"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: no local forge in .agent-harness/forge")
    assert err.count("\n") == 1
    assert not (home / ".agent-harness").exists()


def test_reconcile_makes_no_forge_nor_repository_for_a_wrong_folder_or_name(
    home: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # It reads: once it made a forge and a database in the wrong folder, or a repository for a
    # mistyped name, and said "0 transitions" with exit 0.
    assert main(["reconcile", "--repo", "me/app", "--forge", "local"]) == 2
    assert capsys.readouterr().err.startswith("error: no local forge in .agent-harness/forge")
    assert not (home / ".agent-harness").exists()
    assert main(["plan", "PLAN.md", "--repo", "me/app", "--forge", "local"]) == 0
    capsys.readouterr()
    assert main(["reconcile", "--repo", "me/other", "--forge", "local"]) == 2
    assert "no repository me/other on the local forge" in capsys.readouterr().err
    assert sorted(p.name for p in (home / ".agent-harness/forge/git/me").iterdir()) == ["app.git"]


def test_a_run_before_the_history_is_pushed_says_how_to_push_it(
    home: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-local")
    assert main(["plan", "PLAN.md", "--repo", "me/app", "--forge", "local", "--json"]) == 0
    clone_url = json.loads(capsys.readouterr().out)["local_forge"]["clone_url"]
    git(home / "app", "remote", "add", "origin", clone_url)  # ... but nothing pushed yet

    argv = ["run", "--repo", "me/app", "--forge", "local", "--work", "app", "--plan", "PLAN.md"]
    code = main([*argv, "--agent", "python -c pass {prompt_file}", "--reviewer", "openai:x"])

    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2
    assert err == [
        f"error: me/app on the local forge is empty: push your clone's history to it first; in "
        f"the clone: git remote add origin {clone_url} (or, if it has an origin already: git "
        f"remote set-url origin {clone_url}), then git push -u origin HEAD"
    ]


def test_a_run_from_another_folder_is_sent_back_to_the_forge_its_clone_pushes_to(
    home: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-local")
    assert main(["plan", "PLAN.md", "--repo", "me/app", "--forge", "local", "--json"]) == 0
    clone_url = json.loads(capsys.readouterr().out)["local_forge"]["clone_url"]
    git(home / "app", "remote", "add", "origin", clone_url)
    git(home / "app", "push", "-q", "origin", "main")
    elsewhere = home / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    argv = ["run", "--repo", "me/app", "--forge", "local", "--work", str(home / "app")]
    code = main([*argv, "--plan", str(home / "PLAN.md"), "--agent", "python -c pass {prompt_file}",
                 "--reviewer", "openai:x"])  # fmt: skip
    # It read: "me/app on the local forge is empty", with a hint to point the clone at a new,
    # empty forge here (leaving the issues of the first behind), and it made that forge.
    assert code == 2
    assert capsys.readouterr().err.strip().splitlines() == [
        f"error: --work {home / 'app'} pushes to the local forge in {home / '.agent-harness'}, "
        f"not to this folder's ({elsewhere / '.agent-harness'}): run it from {home}, where its "
        "issues and pull requests are"
    ]
    assert list(elsewhere.iterdir()) == []


@pytest.mark.postgres
def test_plan_sync_waits_while_a_run_syncs_the_same_plan(
    home: Path, pg_engine: Engine, capsys: pytest.CaptureFixture[str]
) -> None:
    """`plan --repo` takes the same lock in the runs' database as a run's sync, so the two never
    each open an issue for one item."""
    store = pg_engine.open()
    waiting = (
        "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND NOT granted "
        "AND database = (SELECT oid FROM pg_database WHERE datname = current_database())"
    )
    codes: list[int] = []
    command = ["plan", "PLAN.md", "--repo", "me/app", "--forge", "local", "--db"]
    sync = threading.Thread(target=lambda: codes.append(main([*command, cli_url(pg_engine)])))
    try:
        with held_by_this_host(store, plan_sync_lock("me/app", "PLAN")):  # a run, syncing
            sync.start()
            deadline = time.monotonic() + 60
            while not waiters(store, waiting) and sync.is_alive():
                assert time.monotonic() < deadline, "the plan sync never asked for the lock"
                time.sleep(0.05)
            assert sync.is_alive() and issues(home) == []  # it waits, having written nothing
        sync.join(60)
    finally:
        store.close()
    assert codes == [0]
    assert [title for title in issues(home)] == ["T1: Count words"]


def waiters(store: Store, query: str) -> int:
    with store.transaction(write=False) as tx:
        row = tx.one(query)
    return int(row[0]) if row else 0


def issues(home: Path) -> list[str]:
    """The titles of me/app's issues on the local forge (none when it has no such repo yet)."""
    with local_forge(home / ".agent-harness") as forge:
        client = make_client(forge.api_url, forge.token)
        try:
            repo = client.get_repo("me/app")
            return [issue.title for issue in repo.get_issues(state="all")]
        except UnknownObjectException:
            return []
        finally:
            client.close()


def test_plan_sync_with_a_database_that_cannot_be_opened_makes_nothing(
    home: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    refused = "postgresql://postgres@127.0.0.1:9/test"  # nothing listens on port 9
    code = main(["plan", "PLAN.md", "--repo", "me/app", "--forge", "local", "--db", refused])
    err = capsys.readouterr().err
    assert code != 0 and "cannot open" in err and len(err.strip().splitlines()) == 1
    assert not (home / ".agent-harness").exists()  # no forge, no repository made


def test_two_kiro_specs_sync_under_their_own_keys_never_into_each_others_issues(
    home: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each Kiro spec has a tasks.md numbered from 1: keyed by the file's name, the second
    spec's task 1 would rewrite the first's issue. Each is keyed by its spec, from wherever
    it is named."""
    for spec, title in (("link-store", "Store links"), ("tagging", "Tag links")):
        folder = home / ".kiro" / "specs" / spec
        folder.mkdir(parents=True)
        (folder / "tasks.md").write_text(f"- [ ] 1. {title}\n- [ ] 2. Document it\n")
    sync = ["--repo", "me/app", "--forge", "local"]
    assert main(["plan", ".kiro/specs/link-store/tasks.md", *sync]) == 0
    assert "me/app (plan key link-store)" in capsys.readouterr().out
    monkeypatch.setenv("AGENT_HARNESS_STATE_DIR", str(home / ".agent-harness"))
    monkeypatch.chdir(home / ".kiro" / "specs" / "tagging")
    assert main(["plan", "tasks.md", *sync]) == 0
    said = capsys.readouterr().out
    assert "me/app (plan key tagging)" in said and "2 created" in said
    with local_forge(home / ".agent-harness") as forge:
        issues = make_client(forge.api_url, forge.token).get_repo("me/app").get_issues()
        titles = sorted(issue.title for issue in issues)
    assert titles == ["1: Store links", "1: Tag links", "2: Document it", "2: Document it"]


def test_a_plan_named_through_a_symbolic_link_keeps_the_links_name_as_its_key(
    home: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (home / "docs").mkdir()
    (home / "PLAN.md").rename(home / "docs" / "roadmap.md")
    (home / "PLAN.md").symlink_to(home / "docs" / "roadmap.md")
    assert main(["plan", "PLAN.md", "--repo", "me/app", "--forge", "local", "--dry-run"]) == 0
    assert "me/app (plan key PLAN)" in capsys.readouterr().out


def test_a_plan_from_standard_input_needs_a_key_so_it_never_opens_its_issues_twice(
    home: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    import io

    def stdin() -> None:
        text = (home / "PLAN.md").read_bytes()
        monkeypatch.setattr("sys.stdin", io.TextIOWrapper(io.BytesIO(text)))

    assert main(["plan", "PLAN.md", "--repo", "me/app", "--forge", "local"]) == 0
    made = len(list((home / ".agent-harness").rglob("*")))
    capsys.readouterr()
    stdin()
    assert main(["plan", "-", "--repo", "me/app", "--forge", "local"]) == 2
    assert capsys.readouterr().err.strip() == (
        "error: a plan read from standard input has no file name to key its issues by: give "
        "--plan-key, the key of the plan file it stands for (PLAN for PLAN.md)"
    )
    stdin()
    argv = ["plan", "-", "--repo", "me/app", "--forge", "local", "--plan-key", "PLAN", "--json"]
    assert main(argv) == 0  # the plan file's own issues, found again: none made twice
    again = json.loads(capsys.readouterr().out)
    assert again["created"] == []
    assert [c["issue"] for c in again["unchanged"] + again["updated"]] == [1]
    assert made <= len(list((home / ".agent-harness").rglob("*")))


def test_a_command_run_in_a_folder_of_the_clone_uses_the_clones_state(
    home: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    app = home / "app"
    (app / "PLAN.md").write_text(PLAN)
    monkeypatch.chdir(app)
    assert main(["plan", "PLAN.md", "--repo", "me/app", "--forge", "local"]) == 0
    (app / "src").mkdir(exist_ok=True)
    monkeypatch.chdir(app / "src")
    capsys.readouterr()
    # Before, a second state and a second forge were made in src/, the issues made again.
    assert main(["plan", "../PLAN.md", "--repo", "me/app", "--forge", "local", "--json"]) == 0
    again = json.loads(capsys.readouterr().out)
    assert again["created"] == [] and [c["issue"] for c in again["unchanged"]] == [1]
    assert not (app / "src" / ".agent-harness").exists()
    # ... but never above the clone: a folder outside any clone keeps its own state.
    outside = home / "elsewhere"
    outside.mkdir()
    monkeypatch.chdir(outside)
    assert main(["plan", "../PLAN.md", "--repo", "me/app", "--forge", "local", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["created"] != []
