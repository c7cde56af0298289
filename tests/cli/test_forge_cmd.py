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


@pytest.mark.acceptance
def test_serve_prints_the_url_answers_requests_and_stops_on_ctrl_c(tmp_path: Path) -> None:
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "agent_harness",
            "forge",
            "serve",
            "--data",
            str(tmp_path),
            "--port",
            "0",
            "--token",
            "t0k",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stdout is not None
        first = proc.stdout.readline()
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
