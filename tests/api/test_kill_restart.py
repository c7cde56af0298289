"""A supervising server killed with SIGKILL mid-attempt and started again on the same database
takes its work back and finishes it: no item lost, none done twice, one pull request."""

from __future__ import annotations

import os
import shlex
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import httpx
import pytest
from fastapi.testclient import TestClient

from agent_harness.api.app import create_app
from agent_harness.api.context import ApiContext
from agent_harness.api.pools import ProjectPools
from agent_harness.config import Settings
from agent_harness.demo.rules import review_rules
from agent_harness.store.database import open_store
from agent_harness.testing.model_server import ModelServer, ScriptedResponder
from tests.api.test_supervised import EXAMPLES, _clone

pytestmark = [pytest.mark.acceptance, pytest.mark.slow]

TOKEN = "kill-token-0a1b2c3d4e5f"
AUTH = {"Authorization": f"Bearer {TOKEN}"}


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _serve(home: Path, port: int, env: dict[str, str]) -> subprocess.Popen[bytes]:
    server = subprocess.Popen(
        [sys.executable, "-m", "agent_harness", "serve", "--supervise", "--port", str(port)],
        cwd=home, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    deadline = time.monotonic() + 30  # a fail-safe for a server that never comes up
    while True:
        try:
            httpx.get(f"http://127.0.0.1:{port}/healthz")
            return server
        except httpx.ConnectError:
            assert server.poll() is None and time.monotonic() < deadline
            time.sleep(0.05)


def _until(ask: Any, test: Any, what: str) -> dict[str, Any]:
    deadline = time.monotonic() + 120  # a fail-safe, not a measurement
    while time.monotonic() < deadline:
        answer = ask()
        if test(answer):
            return answer  # type: ignore[no-any-return]
        time.sleep(0.05)
    raise AssertionError(f"never {what}: {answer}")


def test_a_killed_server_resumes_without_losing_or_repeating_work(tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    settings = Settings(state_dir=str(home / ".agent-harness"), sessions={"host": "headless"})
    work = _clone(tmp_path, "me/app", settings)
    port = _free_port()
    base = f"http://127.0.0.1:{port}"
    with ModelServer([ScriptedResponder(review_rules)]) as reviewer:
        env = {
            **{k: v for k, v in os.environ.items() if not k.startswith("AGENT_HARNESS_")},
            "PATH": os.pathsep.join([str(Path(sys.executable).parent), os.environ["PATH"]]),
            "HARNESS_TOKEN": TOKEN,
            "OPENAI_BASE_URL": f"{reviewer.url}/v1",
            "OPENAI_API_KEY": "sk-local",
            "AGENT_HARNESS_SESSIONS__HOST": "headless",
        }
        agent = shlex.join([sys.executable, str(EXAMPLES / "agent" / "tally_agent.py")])
        first = _serve(home, port, env)
        try:
            spec = {
                "repo": "me/app", "work_dir": str(work), "plan": "PLAN.md", "forge": "local",
                "agent": agent + " --think 1 --prompt-file {prompt_file}",
                "reviewer": "openai:gpt-test", "checks": ["python -m unittest"],
            }  # fmt: skip
            assert httpx.post(f"{base}/api/projects", json=spec, headers=AUTH).status_code == 201
            started = httpx.post(f"{base}/api/projects/me/app:PLAN/start", headers=AUTH)
            assert started.status_code == 200
            _until(
                lambda: httpx.get(f"{base}/api/work/T1?project=me/app:PLAN", headers=AUTH).json(),
                lambda d: any(e["kind"] == "agent_started" for e in d.get("events", [])),
                "saw the agent start",
            )
        finally:
            first.send_signal(signal.SIGKILL)
            first.wait()
        # Started again on the same database, as `serve --supervise` starts (in this process,
        # to save a second start-up): the project was left running, so it is resumed.
        store = open_store(str(home / ".agent-harness" / "harness.sqlite"))
        pools = ProjectPools(store, settings, env=env)
        client = TestClient(
            create_app(ApiContext(store, "supervised", pools=pools, settings=settings), token=TOKEN)
        )
        try:
            assert pools.resume() == ["me/app:PLAN"]
            work_view = _until(
                lambda: client.get("/api/work?project=me/app:PLAN", headers=AUTH).json(),
                lambda w: w.get("counts", {}).get("pr_open") == 1,
                "opened the pull request",
            )
            assert work_view["counts"] == {"pr_open": 1}
            detail = client.get("/api/work/T1?project=me/app:PLAN", headers=AUTH).json()
        finally:
            pools.close(join_s=30)
            store.close()
    kinds = [e["kind"] for e in detail["events"]]
    assert kinds.count("pr_opened") == 1 and kinds.count("pushed") == 1
    assert "lease_reclaimed" in kinds  # taken back from the killed server's worker at once
