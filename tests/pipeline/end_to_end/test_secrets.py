"""No secret reaches an agent or a check, and none leaves in a diff, whatever the host.

The agent here is an adversary: it reads every process's environment and command line it can,
and every file under the harness's state directory, looking for the values of the secrets the
harness was started with. It must find none of them, while finding a harmless canary in the
harness's own environment (so the look is shown to work).
"""

from __future__ import annotations

import json
import os
import shlex
import shutil
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from agent_harness.pipeline.settings import RunSettings
from agent_harness.sessions.remote import RemoteSessionHost
from agent_harness.testing.agents import write_scripted_agent
from agent_harness.testing.forge import TOKEN

from .conftest import KEY_ENV, REPO, Harness

ONE_ITEM = "### T1: Count words\nMake it.\n"
# Each secret is unique to this test session: another test running beside this one (another
# pytest worker) may hold the suite's usual values, and the scan must find only this run's.
_RUN = uuid.uuid4().hex[:12]
ANTHROPIC = f"sk-ant-api03-{_RUN}" + "k" * 28
DATABASE_URL = f"postgresql://app:CorrectHorse{_RUN}@db.internal/app"
CANARY = ("AH_CANARY", "visible-to-anyone")


@pytest.fixture
def own_token(harness: Harness) -> Iterator[str]:
    """The forge accepts a token of this test alone while it runs, instead of the shared one."""
    forge = harness.forge.forge
    forge.token = f"{TOKEN}-{_RUN}"
    try:
        yield forge.token
    finally:
        forge.token = TOKEN


def scanning_agent(h: Harness, report: Path, needles: list[str], dirs: list[Path]) -> str:
    spec = h.tmp / "needles.json"
    spec.write_text(json.dumps({"secrets": needles, "canary": CANARY[1]}))
    steps = {
        "steps": [
            {
                "secret_scan": {
                    "needles": str(spec),
                    "out": str(report),
                    "dirs": list(map(str, dirs)),
                }
            },
            {"write_file": {"path": "scanned.txt", "content": "looked everywhere\n"}},
        ],
        "exit": 0,
    }
    return shlex.join(write_scripted_agent(h.tmp / "agents", steps)) + " {prompt_file}"


def env_dumping_check(target: Path) -> str:
    code = f"import json, os; json.dump(dict(os.environ), open({str(target)!r}, 'w'))"
    return shlex.join([sys.executable, "-c", code])


def running_pids() -> set[int]:
    return {int(name) for name in os.listdir("/proc") if name.isdigit()}


def assert_nothing_found(report: Path, holder_pid: int, before: set[int]) -> dict[str, Any]:
    """No process this test started (the harness, its sessions, its agents) holds a secret.
    Processes older than the test (other tests' leftovers), and those of tests running beside
    it, are not this run's doing."""
    found = json.loads(report.read_text())
    assert found["read"] > 0
    # As root the scan reads the harness's environment (and finds only the canary there); as
    # anyone else the sealed harness refuses even its own user's look, the stronger outcome.
    seen = holder_pid in found["canary_pids"]
    refused = os.geteuid() != 0 and holder_pid in found["refused_pids"]
    assert seen or refused, "the scan never looked at the harness's environment"

    worker = os.environ.get("PYTEST_XDIST_WORKER")

    def ours(hit: dict[str, Any]) -> bool:
        where = str(hit["where"])
        if not where.startswith("/proc/"):
            return True
        # Another test running beside this one (another xdist worker's) is not this run's.
        other_test = hit.get("worker") not in (None, worker)
        return int(where.split("/")[2]) not in before and not other_test

    assert [hit for hit in found["hits"] if ours(hit)] == []
    return found


@pytest.mark.acceptance
@pytest.mark.parametrize("host", ["tmux", "headless"])
def test_an_agent_of_the_cli_finds_no_secret_anywhere_it_can_look(
    harness: Harness, own_token: str, tmp_path: Path, host: str
) -> None:
    if host == "tmux" and shutil.which("tmux") is None:
        pytest.skip("tmux is not installed")
    h = harness
    home = tmp_path / "home"
    home.mkdir()
    reviewer_key = f"sk-proj-{_RUN}" + "r" * 28
    secrets = {
        "GH_TOKEN": own_token,
        "OPENAI_API_KEY": reviewer_key,
        "ANTHROPIC_API_KEY": ANTHROPIC,
        "DATABASE_URL": DATABASE_URL,
    }
    report = tmp_path / "scan.json"
    check_env = tmp_path / "check-env.json"
    state = tmp_path / "run" / ".agent-harness"
    agent = scanning_agent(h, report, list(secrets.values()), [state, home])
    (tmp_path / "run").mkdir()
    (tmp_path / "run" / "PLAN.md").write_text(ONE_ITEM)
    env = {
        "PATH": os.pathsep.join([str(Path(sys.executable).parent), os.environ.get("PATH", "")]),
        "HOME": str(home),
        "LANG": "C.UTF-8",
        "GITHUB_API_URL": h.forge.server.api_url,
        "OPENAI_BASE_URL": f"{h.model.url}/v1",
        "AGENT_HARNESS_SESSIONS__HOST": host,
        "AGENT_HARNESS_TRACKER__WRITE_SPACING_S": "0",
        CANARY[0]: CANARY[1],
        **secrets,
    }
    before = running_pids()
    proc = subprocess.Popen(
        [sys.executable, "-m", "agent_harness", "run", "--repo", REPO, "--work", str(h.work),
         "--plan", "PLAN.md", "--agent", agent, "--reviewer", "openai:gpt-test",
         "--check", env_dumping_check(check_env), "--max-attempts", "1", "--json"],
        cwd=tmp_path / "run",
        env={**env, "TMUX_TMPDIR": str(tmp_path)},  # a private tmux server for this test
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )  # fmt: skip
    try:
        out, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
        subprocess.run(
            ["tmux", "-L", "agent-harness", "kill-server"],
            env={"PATH": env["PATH"], "TMUX_TMPDIR": str(tmp_path)},  # no secret: a scan may look
            capture_output=True,
        ) if host == "tmux" else None
    assert proc.returncode == 0, err
    lines = [json.loads(line) for line in out.splitlines() if line.startswith("{")]
    assert any(line.get("event") == "pr_opened" for line in lines), out[-2000:]
    assert_nothing_found(report, proc.pid, before)
    seen_by_check = json.loads(check_env.read_text())
    assert CANARY[0] in seen_by_check  # the check got the ordinary environment ...
    for name in secrets:
        assert name not in seen_by_check  # ... and no credential, whatever its name
    assert not set(secrets.values()) & set(seen_by_check.values())
    for value in secrets.values():
        assert value not in out and value not in err  # nor was any printed


@pytest.mark.acceptance
def test_an_agent_on_a_remote_host_finds_no_secret(harness: Harness, tmp_path: Path) -> None:
    h = harness
    server_token = f"session-server-token-{_RUN}"
    state = tmp_path / "remote-state"
    env = {
        "PATH": os.pathsep.join([str(Path(sys.executable).parent), os.environ.get("PATH", "")]),
        "HOME": str(tmp_path),
        "AGENT_HARNESS_SESSION_TOKEN": server_token,
        CANARY[0]: CANARY[1],
    }
    before = running_pids()
    server = subprocess.Popen(
        [sys.executable, "-m", "agent_harness.testing.session_server", "--state", str(state)],
        env=env,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert server.stdout is not None
        url = server.stdout.readline().split()[-1]
        assert url.startswith("http://127.0.0.1:")
        h.env["ANTHROPIC_API_KEY"] = ANTHROPIC
        needles = [h.env["GH_TOKEN"], h.env[KEY_ENV], ANTHROPIC, server_token]
        report = tmp_path / "scan.json"
        agent = scanning_agent(h, report, needles, [h.state_dir, state])
        host = RemoteSessionHost(url, server_token)
        try:
            pipeline = h.pipeline(
                ONE_ITEM,
                agent=agent,
                host=host,
                settings=RunSettings(checks=[], lease_s=30.0, idle_poll_s=0.02, max_attempts=1),
            )
            [item] = pipeline.run().items
        finally:
            host.close()
        assert item.state == "pr_open", item.reason
        assert_nothing_found(report, server.pid, before)
    finally:
        server.kill()
        server.wait()


def remote_branches(h: Harness) -> str:
    return subprocess.run(
        ["git", "ls-remote", "--heads", "origin"],
        cwd=h.work,
        capture_output=True,
        text=True,
        check=True,
    ).stdout


def writing_agent(h: Harness, path: str, text: str) -> str:
    steps = {"steps": [{"write_file": {"path": path, "content": text}}], "exit": 0}
    return shlex.join(write_scripted_agent(h.tmp / "agents", steps)) + " {prompt_file}"


@pytest.mark.integration
def test_a_secret_the_agent_writes_stops_the_item_before_review_and_push(harness: Harness) -> None:
    h = harness
    h.env["ANTHROPIC_API_KEY"] = ANTHROPIC  # the agent's own key, handed to it by its preset
    agent = writing_agent(h, "config/settings.py", f"A = 1\nKEY = '{ANTHROPIC}'\n")
    pipeline = h.pipeline(ONE_ITEM, agent=agent, settings=RunSettings(checks=[], idle_poll_s=0.02))
    [item] = pipeline.run().items
    assert item.state == "failed" and item.attempts == 1  # no attempt can undo a leak
    reason = item.reason or ""
    assert "config/settings.py:2 holds the value of ANTHROPIC_API_KEY" in reason
    assert ANTHROPIC not in reason
    events = h.store.all_events(project=pipeline.project, item="T1")
    assert ANTHROPIC not in json.dumps([e.payload.as_dict() for e in events])
    assert [e.kind for e in events if e.kind in ("secret_found", "review", "pushed")] == [
        "secret_found"
    ]
    assert h.reviews() == []  # the reviewer (another vendor) never saw the diff
    assert "agent-harness/" not in remote_branches(h) and h.pulls() == []


@pytest.mark.integration
def test_key_shapes_are_refused_unless_a_person_allowed_them_in_fixtures(harness: Harness) -> None:
    h = harness
    fake = "ghp_" + "F1x7" * 9  # shaped like a GitHub token, known to nobody
    agent = writing_agent(h, "tests/fixtures/tokens.txt", fake + "\n")
    refused = h.pipeline(ONE_ITEM, agent=agent, settings=RunSettings(checks=[], idle_poll_s=0.02))
    [item] = refused.run().items
    assert item.state == "failed"
    assert "tests/fixtures/tokens.txt:1 holds a GitHub token" in (item.reason or "")


@pytest.mark.integration
def test_key_shapes_in_allowed_fixtures_pass(harness: Harness) -> None:
    h = harness
    fake = "ghp_" + "F1x7" * 9
    agent = writing_agent(h, "tests/fixtures/tokens.txt", fake + "\n")
    allowed = RunSettings(
        checks=[], idle_poll_s=0.02, secret_shapes_ignored_in=["tests/fixtures/**"]
    )
    [item] = h.pipeline(ONE_ITEM, agent=agent, settings=allowed).run().items
    assert item.state == "pr_open", item.reason


@pytest.mark.integration
def test_checks_get_a_password_url_only_when_a_person_passes_it(harness: Harness) -> None:
    h = harness
    h.env["DATABASE_URL"] = DATABASE_URL
    h.env["TEST_SUITE_MODE"] = "fast"
    seen = h.tmp / "check-env.json"
    agent = shlex.join(write_scripted_agent(h.tmp / "agents", "done")) + " {prompt_file}"
    default = RunSettings(checks=[env_dumping_check(seen)], idle_poll_s=0.02)
    h.pipeline(ONE_ITEM, agent=agent, settings=default).run()
    first = json.loads(seen.read_text())
    assert "DATABASE_URL" not in first and first["TEST_SUITE_MODE"] == "fast"
    assert "GH_TOKEN" not in first and KEY_ENV not in first

    seen.unlink()
    opted_in = RunSettings(
        checks=[env_dumping_check(seen)], idle_poll_s=0.02, check_env_pass=["DATABASE_URL"]
    )
    second_plan = "### T2: Count lines\nMake it.\n"
    h.pipeline(second_plan, agent=agent, settings=opted_in).run()
    second = json.loads(seen.read_text())
    assert second["DATABASE_URL"] == DATABASE_URL
    assert "GH_TOKEN" not in second and KEY_ENV not in second


@pytest.mark.integration
def test_a_key_an_agent_prints_is_masked_for_observers_as_in_the_log(
    harness: Harness, monkeypatch: pytest.MonkeyPatch
) -> None:
    h = harness
    monkeypatch.setenv("ANTHROPIC_API_KEY", ANTHROPIC)  # the harness's own key
    steps = {"steps": [{"print": f"error: my key is {ANTHROPIC}"}], "exit": 3}
    agent = shlex.join(write_scripted_agent(h.tmp / "agents", steps)) + " {prompt_file}"
    told: list[str] = []

    def observer(kind: str, item: str, payload: Any) -> None:
        told.append(json.dumps(payload.as_dict()))

    settings = RunSettings(checks=[], idle_poll_s=0.02, max_attempts=1)
    [item] = h.pipeline(ONE_ITEM, agent=agent, settings=settings, observer=observer).run().items
    assert item.state == "failed"
    finished = [t for t in told if "my key is" in t]
    assert finished, "the agent's last words never reached the observer"
    # `run --json` printed what the observer was told: the key, where the log masked it.
    assert [t for t in told if ANTHROPIC in t] == []
    assert "[redacted ANTHROPIC_API_KEY]" in finished[0]
