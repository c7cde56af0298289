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


def start_serving(*args: str) -> tuple[subprocess.Popen[str], str]:
    """`agent-harness forge serve ARGS` in the background, and the first line it printed."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "agent_harness", "forge", "serve", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout is not None
    return proc, proc.stdout.readline()


@pytest.mark.acceptance
def test_serve_prints_the_url_answers_requests_and_stops_on_ctrl_c(tmp_path: Path) -> None:
    proc, first = start_serving("--data", str(tmp_path), "--port", "0", "--token", "t0k")
    try:
        assert proc.stdout is not None
        assert first.startswith("forge serving http://127.0.0.1:")
        url = first.split()[2]
        assert f"GITHUB_API_URL={url}" in proc.stdout.readline()
        req = urllib.request.Request(f"{url}/user", headers={"Authorization": "token t0k"})
        with urllib.request.urlopen(req, timeout=5) as response:
            assert json.loads(response.read())["login"] == "forge-user"
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=10)
    finally:
        proc.kill()
    assert proc.returncode == 0, err
    assert "forge stopped" in out
    assert (tmp_path / "forge.sqlite3").exists()


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
