"""`agent-harness forge serve`: serves in the foreground, stops on Ctrl-C, fails in one line."""

from __future__ import annotations

import json
import signal
import socket
import subprocess
import sys
import urllib.request
from pathlib import Path

import pytest

from agent_harness.cli import main
from tests.shared.sessions import AS_A_SCRIPTS_BACKGROUND_JOB


def start_serving(*args: str, deaf_to_ctrl_c: bool = False) -> tuple[subprocess.Popen[str], str]:
    """`agent-harness forge serve ARGS` in the background, and the first line it printed; with
    `deaf_to_ctrl_c`, started as a script's background job is, with SIGINT ignored."""
    command = [sys.executable, "-m", "agent_harness", "forge", "serve", *args]
    if deaf_to_ctrl_c:
        command = [*AS_A_SCRIPTS_BACKGROUND_JOB, *command]
    proc = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    return proc, proc.stdout.readline()


@pytest.mark.integration  # the name is looked up
@pytest.mark.parametrize(
    ("host", "said"),
    [("", "is empty; give 127.0.0.1"), ("a b", "'a b' is no address here")],
)
def test_a_host_that_is_no_address_is_refused_before_anything_listens(
    host: str, said: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # '' listened on every interface, unsaid, with links to http://:PORT; 'a b' was a bug (70).
    data = tmp_path / "forge"
    assert main(["forge", "serve", "--data", str(data), "--host", host, "--port", "0"]) == 2
    assert said in capsys.readouterr().err
    assert not data.exists()


@pytest.mark.acceptance
def test_serve_prints_the_url_answers_requests_and_stops_on_ctrl_c(tmp_path: Path) -> None:
    proc, first = start_serving(
        "--data", str(tmp_path), "--port", "0", "--token", "t0k", "--collaborator", "ann=ann-t0k"
    )
    try:
        assert proc.stdout is not None
        assert first.startswith("forge serving http://127.0.0.1:")
        url = first.split()[2]
        banner: list[str] = []
        while not banner or banner[-1] not in ("", "  Ctrl-C to stop\n"):  # "": it ended
            banner.append(proc.stdout.readline())
        assert f"GITHUB_API_URL={url}" in banner[0]
        assert "  collaborators: ann\n" in banner
        for token, login in (("t0k", "forge-user"), ("ann-t0k", "ann")):
            req = urllib.request.Request(f"{url}/user", headers={"Authorization": f"token {token}"})
            with urllib.request.urlopen(req, timeout=5) as response:
                assert json.loads(response.read())["login"] == login
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=10)
    finally:
        proc.kill()
    assert proc.returncode == 0, err
    assert "forge stopped" in out
    assert "ann-t0k" not in "".join(banner) + out + err
    assert (tmp_path / "forge.sqlite3").exists()
    # A folder with no forge in it (a mistyped --data) is said to be one made just now.
    assert first.endswith(f"(data: {tmp_path.resolve()}, made just now: no repositories yet)\n")
    again, second = start_serving("--data", str(tmp_path), "--port", "0", "--token", "t0k")
    again.kill()
    again.communicate(timeout=10)
    assert second.endswith(f"(data: {tmp_path.resolve()})\n")


@pytest.mark.acceptance
@pytest.mark.parametrize(
    ("stop", "deaf_to_ctrl_c"),
    [(signal.SIGTERM, False), (signal.SIGINT, True)],
    ids=["kill", "ctrl-c-as-a-background-job"],
)
def test_serve_stops_cleanly_on_kill_and_on_ctrl_c_as_a_scripts_background_job(
    tmp_path: Path, stop: signal.Signals, deaf_to_ctrl_c: bool
) -> None:
    proc, first = start_serving(
        "--data", str(tmp_path), "--port", "0", deaf_to_ctrl_c=deaf_to_ctrl_c
    )
    try:
        assert first.startswith("forge serving ")
        assert proc.stdout is not None
        while proc.stdout.readline() not in ("", "  Ctrl-C to stop\n"):
            pass  # the handlers are in place once it says how to stop it
        proc.send_signal(stop)
        out, err = proc.communicate(timeout=30)
    finally:
        proc.kill()
    assert (proc.returncode, out, err) == (0, "forge stopped\n", "")


@pytest.mark.integration
def test_port_in_use_is_one_line_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        code = main(["forge", "serve", "--data", str(tmp_path), "--port", str(port)])
    err = capsys.readouterr().err
    assert code == 1
    assert err.strip() == f"error: forge cannot listen on 127.0.0.1:{port}: Address already in use"


@pytest.mark.acceptance
def test_serving_a_forge_served_already_says_where(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    proc, first = start_serving("--data", str(tmp_path), "--port", "0", "--token", "t0k")
    try:
        url = first.split()[2]
        port = url.rsplit(":", 1)[1]
        code = main(["forge", "serve", "--data", str(tmp_path), "--port", port, "--token", "t0k"])
    finally:
        proc.kill()
        proc.communicate(timeout=10)
    assert code == 2
    assert capsys.readouterr().err.strip() == (
        f"error: the forge in {tmp_path.resolve()} is served at {url} already; stop that one "
        "first, or give this one another --port"
    )


@pytest.mark.unit
@pytest.mark.parametrize(
    ("given", "said"),
    [
        (["s3cret-no-login"], "expects LOGIN=TOKEN, with no '=' given"),
        (["=s3cret"], "needs LOGIN=TOKEN: a login without spaces, then a token"),
        (["ann=s3cret", "ann=s3cret2"], "ann is named twice"),
        (["forge-user=s3cret"], "collaborator forge-user is the forge's own user"),
        (["Forge-User=s3cret"], "collaborator Forge-User is the forge's own user"),
        (["ann=s3cret", "Ann=s3cret2"], "a collaborator is named twice (logins ignore case)"),
        (["s3cret="], "needs LOGIN=TOKEN: a login without spaces, then a token"),
        (["ann=s3cret", "bob=s3cret"], "each collaborator needs a token of its own"),
        (["ann=forge-token"], "each collaborator needs a token of its own"),
    ],
)
def test_a_collaborator_given_wrongly_is_one_line_error_that_never_shows_its_token(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], given: list[str], said: str
) -> None:
    args = [arg for spec in given for arg in ("--collaborator", spec)]
    code = main(["forge", "serve", "--data", str(tmp_path / "data"), "--port", "0", *args])
    err = capsys.readouterr().err
    assert code != 0 and said in err
    assert "s3cret" not in err and "forge-token" not in err
    assert not (tmp_path / "data").exists()  # nothing made


@pytest.mark.unit
def test_unusable_data_dir_is_one_line_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("not a directory")
    code = main(["forge", "serve", "--data", str(blocker / "data"), "--port", "0"])
    err = capsys.readouterr().err
    assert code == 1
    assert err.startswith(f"error: forge data directory {blocker / 'data'} cannot be used")
    assert err.count("\n") == 1


@pytest.mark.unit
def test_help_has_an_example(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["forge", "serve", "--help"]) == 0
    assert "agent-harness forge serve --data .forge --port 8080" in capsys.readouterr().out


@pytest.mark.acceptance
def test_serve_on_a_local_forges_data_listens_where_its_links_point_with_its_token(
    tmp_path: Path,
) -> None:
    from agent_harness.forge.local import local_forge

    with local_forge(tmp_path / "state") as made:  # what --forge local leaves behind
        pass
    data = tmp_path / "state" / "forge"
    assert made.web_url is not None
    proc, first = start_serving("--data", str(data))
    try:
        assert proc.stdout is not None
        assert first.startswith(f"forge serving {made.web_url} "), first
        second = proc.stdout.readline()
        assert f'GITHUB_TOKEN="$(cat {data / "token"})"' in second
        req = urllib.request.Request(
            f"{made.web_url}/user", headers={"Authorization": f"token {made.token}"}
        )
        with urllib.request.urlopen(req, timeout=5) as response:
            assert json.loads(response.read())["login"] == "forge-user"
        with urllib.request.urlopen(f"{made.web_url}/_html/", timeout=5) as response:
            assert "Repositories" in response.read().decode()
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=10)
    finally:
        proc.kill()
    assert proc.returncode == 0, err
    assert made.token not in out + err  # the token itself is never printed


@pytest.mark.unit
def test_merge_and_close_teach_by_example(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["forge", "merge", "--help"]) == 0
    out = capsys.readouterr().out
    assert "agent-harness forge merge me/app 2" in out and "--method" in out
    assert main(["forge", "close", "--help"]) == 0
    assert "agent-harness forge close me/app 1" in capsys.readouterr().out
