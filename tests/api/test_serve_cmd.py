"""`agent-harness serve` as a user starts it: refused without a token, bound to loopback, the
token in no log line, stopped cleanly by SIGTERM."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from agent_harness.cli import main
from agent_harness.store.database import open_store

TOKEN = "serve-token-9f8e7d6c5b4a"


@pytest.mark.integration
def test_serve_refuses_to_start_without_a_token(capsys: pytest.CaptureFixture[str]) -> None:
    # HARNESS_TOKEN is unset in the suite's environment: the server never comes up open.
    assert "HARNESS_TOKEN" not in os.environ
    assert main(["serve", "--port", "1"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "HARNESS_TOKEN is not set" in err


@pytest.mark.integration
def test_help_teaches_both_modes(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["serve", "--help"]) == 0
    text = capsys.readouterr().out
    assert "monitoring (default)" in text and "--supervise" in text and "HARNESS_TOKEN" in text


@pytest.mark.unit
def test_monitoring_a_database_that_is_not_there_is_refused_and_makes_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # It made the folders and an empty database, and served that as healthy.
    monkeypatch.setenv("HARNESS_TOKEN", TOKEN)
    missing = tmp_path / "nowhere" / "h.sqlite"
    assert main(["serve", "--db", str(missing), "--port", "1"]) == 2
    assert f"no database at {missing}: nothing has run here yet" in capsys.readouterr().err
    assert not missing.parent.exists()


@pytest.mark.integration
def test_a_port_another_program_holds_is_one_line_and_starts_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # uvicorn printed four lines of its start, an error and its shutdown, and exited 3.
    monkeypatch.setenv("HARNESS_TOKEN", TOKEN)
    monkeypatch.setenv("AGENT_HARNESS_STATE_DIR", str(tmp_path / "state"))
    with socket.socket() as held:
        held.bind(("127.0.0.1", 0))
        held.listen()
        port = held.getsockname()[1]
        assert main(["serve", "--supervise", "--port", str(port)]) == 2
    err = capsys.readouterr().err
    said = f"port {port} on 127.0.0.1 is in use by another program; give another with --port"
    assert err == f"error: {said}\n"
    assert not (tmp_path / "state").exists()


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.mark.acceptance
def test_serve_answers_on_loopback_and_logs_no_token(
    db_dir: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    port = _free_port()
    open_store(str(db_dir / "h.sqlite")).close()  # a run has been here
    env = {**os.environ, "HARNESS_TOKEN": TOKEN, "PYTHONUNBUFFERED": "1"}
    server = subprocess.Popen(
        [sys.executable, "-m", "agent_harness", "serve", "--port", str(port),
         "--db", str(db_dir / "h.sqlite"), "--root-path", "/harness"],
        env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
    )  # fmt: skip
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 30  # a fail-safe for a server that never comes up
        while True:
            try:
                health = httpx.get(f"{base}/healthz")
                break
            except httpx.ConnectError:
                assert server.poll() is None and time.monotonic() < deadline
                time.sleep(0.05)
        assert health.json()["mode"] == "monitoring"
        headers = {"Authorization": f"Bearer {TOKEN}"}
        assert httpx.get(f"{base}/api/summary").status_code == 401
        # A token sent where it does not belong, in the query string: refused, and not logged.
        assert httpx.get(f"{base}/api/summary", params={"token": TOKEN}).status_code == 401
        assert httpx.get(f"{base}/api/summary", headers=headers).status_code == 200
        schema = httpx.get(f"{base}/openapi.json", headers=headers).json()
        assert schema["servers"] == [{"url": "/harness"}]
        assert httpx.get(f"{base}/docs", headers=headers).status_code == 200
        monkeypatch.setenv("HARNESS_TOKEN", TOKEN)
        assert main(["smoke", base]) == 1  # healthy, cannot run anything
        told = capsys.readouterr().out
        assert told.splitlines()[-1] == f"{base}: healthy, NOT able to run"
        assert "FAIL worker pools: mode monitoring" in told
        monkeypatch.setenv("HARNESS_TOKEN", "not-the-token")
        assert main(["smoke", base, "--json"]) == 2
        assert '"healthy": false' in capsys.readouterr().out
    finally:
        server.send_signal(signal.SIGTERM)
        out, _ = server.communicate(timeout=30)
    # uvicorn shuts down gracefully, then re-raises the signal so the exit status tells it.
    assert server.returncode in (0, -signal.SIGTERM)
    assert "Application shutdown complete" in out
    assert "Uvicorn running on http://127.0.0.1:" in out  # loopback unless --host says so
    assert f"agent-harness serve: monitoring mode, database {db_dir / 'h.sqlite'}" in out
    assert '/api/summary HTTP/1.1" 401' in out and TOKEN not in out
    assert '/api/summary?(query not logged) HTTP/1.1" 401' in out


@pytest.mark.unit
def test_the_access_log_masks_a_token_sent_as_a_path() -> None:
    # `GET /<token>` (refused, 401) once wrote the token to the log; a query is left out.
    import logging

    from agent_harness.api.serving import without_query

    token = "ghp_" + "P" * 36
    record = logging.LogRecord(
        "uvicorn.access", logging.INFO, "", 0, '%s - "%s %s HTTP/%s" %d',
        ("127.0.0.1:5", "GET", f"/api/work/{token}?x={token}", "1.1", 404), None,
    )  # fmt: skip
    assert without_query(record)
    line = record.getMessage()
    assert token not in line and "/api/work/[redacted" in line and "(query not logged)" in line
