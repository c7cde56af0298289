"""`run --approve` at a real terminal (a pseudo-terminal): what it lists, leaving items out."""

from __future__ import annotations

import os
import select
import subprocess
import sys
import time
from pathlib import Path

import pytest

from agent_harness.plan.markdown import parse_plan
from agent_harness.queue import items, leases
from agent_harness.store.database import open_store
from agent_harness.testing.forge import TOKEN

from .conftest import REPO, Harness

pytestmark = pytest.mark.acceptance

PLAN = (
    "### T1: Count words\n\n"
    "### T2: Count lines\n\n"
    "### T3: Rotate the key\nfiles: secrets/key.txt\n\n"
    "### T4: Count bytes\n"
)
# Changes nothing, so each attempt ends at once (no_change); one attempt each.
AGENT = f"{sys.executable} -c pass {{prompt_file}}"


def cli_env(h: Harness) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("AGENT_HARNESS_")}
    env.update(
        GH_TOKEN=TOKEN,
        GITHUB_API_URL=h.forge.server.api_url,
        OPENAI_API_KEY="sk-test",
        OPENAI_BASE_URL=f"{h.model.url}/v1",
        NO_COLOR="1",
        COLUMNS="160",
    )
    return env


def run_args(h: Harness, *extra: str) -> list[str]:
    return [
        sys.executable, "-m", "agent_harness", "run", "--repo", REPO, "--plan", "PLAN.md",
        "--work", str(h.work), "--agent", AGENT, "--reviewer", "openai:gpt-x",
        "--max-attempts", "1", *extra,
    ]  # fmt: skip


class Terminal:
    """A process on a pseudo-terminal: read what it shows, type answers."""

    def __init__(
        self, args: list[str], cwd: Path, env: dict[str, str], stdout: int | None = None
    ) -> None:
        self.fd, child = os.openpty()
        self.proc = subprocess.Popen(
            args,
            cwd=cwd,
            env=env,
            stdin=child,
            stdout=child if stdout is None else stdout,
            stderr=child,
            start_new_session=True,
        )
        os.close(child)
        self.seen = ""

    def wait_for(self, text: str, timeout_s: float = 90.0) -> str:
        deadline = time.monotonic() + timeout_s
        while text not in self.seen:
            left = deadline - time.monotonic()
            assert left > 0, f"never showed {text!r}; showed:\n{self.seen}"
            ready, _, _ = select.select([self.fd], [], [], left)
            if ready:
                try:
                    chunk = os.read(self.fd, 65536)
                except OSError:  # the process ended and the terminal closed
                    chunk = b""
                if not chunk:
                    assert text in self.seen, f"ended without {text!r}; showed:\n{self.seen}"
                self.seen += chunk.decode("utf-8", "replace").replace("\r\n", "\n")
        return self.seen

    def type(self, line: str) -> None:
        os.write(self.fd, line.encode() + b"\r")

    def finish(self) -> int:
        while True:
            ready, _, _ = select.select([self.fd], [], [], 90)
            try:
                chunk = os.read(self.fd, 65536) if ready else b""
            except OSError:
                chunk = b""
            if not chunk:
                break
            self.seen += chunk.decode("utf-8", "replace").replace("\r\n", "\n")
        code = self.proc.wait(60)
        os.close(self.fd)
        return code


def test_a_person_sees_only_what_will_run_and_may_leave_items_out(
    harness: Harness, tmp_path: Path
) -> None:
    h = harness
    cwd = tmp_path / "user"
    cwd.mkdir()
    (cwd / "PLAN.md").write_text(PLAN)
    (cwd / "agent-harness.toml").write_text("protected_paths = ['secrets/**']\n")
    # T4 failed in an earlier run: all its attempts spent.
    project = f"{REPO}:PLAN"
    store = open_store(str(cwd / ".agent-harness" / "harness.sqlite"))
    try:
        items.enqueue(store, project, [parse_plan(PLAN).item("T4")], max_attempts=1)
        lease = leases.claim_next(store, project, "earlier/w1", 60.0)
        assert lease is not None
        assert leases.fail(store, lease, "changed nothing") == "failed"
    finally:
        store.close()

    term = Terminal(run_args(h, "--approve"), cwd, cli_env(h))
    shown = term.wait_for("Leave any out?")
    listed = shown.split("items that will run", 1)[1].split("not run:", 1)[0]
    assert "T1" in listed and "T2" in listed and "T3" in listed and "T4" not in listed
    assert "declares a protected path" in listed  # T3's secrets/key.txt, by the glob
    assert "not run: T4 is failed (agent-harness work retry T4 to run it again)" in shown
    term.type("T9")
    term.wait_for("not in the list: T9")
    term.type("T2, T3")
    term.wait_for("Run 1 of them (T1)? [y/N]")
    term.type("y")
    assert term.finish() == 4, term.seen  # T1 ran, and changed nothing

    store = open_store(str(cwd / ".agent-harness" / "harness.sqlite"))
    try:
        claimed = [e.item for e in store.all_events(project=project) if e.kind == "claimed"]
    finally:
        store.close()
    assert sorted(claimed) == ["T1", "T4"]  # T4 by the earlier run; T2 and T3 were left out


def test_with_json_the_table_and_questions_keep_out_of_stdout(
    harness: Harness, tmp_path: Path
) -> None:
    h = harness
    cwd = tmp_path / "user"
    cwd.mkdir()
    (cwd / "PLAN.md").write_text(PLAN)
    term = Terminal(run_args(h, "--approve", "--json"), cwd, cli_env(h), stdout=subprocess.PIPE)
    term.wait_for("Leave any out?")  # on the terminal, through stderr
    term.type("")
    term.wait_for("Run 4 of them (T1, T2, T3, T4)? [y/N]")
    term.type("n")
    assert term.finish() == 1
    assert "nothing was run" in term.seen
    assert term.proc.stdout is not None
    assert term.proc.stdout.read() == b""  # stdout is for JSON alone
