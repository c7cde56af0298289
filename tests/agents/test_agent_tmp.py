"""Each agent run gets a temporary folder of its own, removed when its session is closed.

Real agent CLIs leave files in the temporary folder every time they start (Claude Code unpacks
a 5.5 MB native library there; others keep sockets and probes). A fleet that runs for a week
starts thousands of them: in the machine's /tmp that fills the disk, and one agent can read
what another left there.
"""

from __future__ import annotations

import dataclasses
import json
import sys
from pathlib import Path

from agent_harness.agents.presets import PRESETS
from agent_harness.agents.runner import AgentState, run_cli_agent
from agent_harness.sessions.protocol import SessionHost
from tests.shared.sessions import base_env

# Writes where a program's temporary files go (Python reads TMPDIR, as Node, Bun and Rust do),
# leaves a file there, and notes both in the worktree.
LITTERER = """\
import json, os, sys, tempfile
where = tempfile.gettempdir()
with open(os.path.join(where, "native-module.so"), "wb") as out:
    out.write(b"x" * 4096)
with open("seen.json", "w") as out:
    json.dump({"TMPDIR": os.environ.get("TMPDIR"), "gettempdir": where,
               "left": os.listdir(where)}, out)
print("done")
"""


def test_an_agents_temporary_files_go_to_its_own_folder_and_leave_with_its_session(
    local_host: SessionHost, name: str, work: Path, state_dir: Path, tmp_path: Path
) -> None:
    script = tmp_path / "litterer.py"
    script.write_text(LITTERER)
    preset = dataclasses.replace(
        PRESETS["claude"], binary=sys.executable, template=(sys.executable, str(script))
    )
    system_tmp = tmp_path / "system-tmp"
    system_tmp.mkdir()
    env = {**base_env(), "TMPDIR": str(system_tmp)}
    ran = run_cli_agent(
        local_host,
        preset,
        session=name,
        workdir=work,
        prompt="Fix the bug.",
        state_dir=state_dir,
        home=state_dir / "agent-home",
        env_source=env,
        timeout_s=60,
        idle_s=30,
        poll_s=0.02,
    )

    assert ran.outcome.state is AgentState.DONE, ran.outcome.reason
    seen = json.loads((work / "seen.json").read_text())
    own = Path(seen["TMPDIR"])
    assert seen["gettempdir"] == seen["TMPDIR"]
    assert own.is_relative_to(state_dir)  # never the machine's shared one
    assert seen["left"] == ["native-module.so"]  # it could write there, and found it empty
    assert not own.exists()  # gone with the session
    assert list(system_tmp.iterdir()) == []  # nothing reached the machine's folder


def test_the_temporary_folder_path_stays_short_enough_for_a_socket(
    local_host: SessionHost, work: Path, tmp_path: Path
) -> None:
    # A Unix socket's path may hold 107 bytes; agents make theirs in TMPDIR. A long session
    # name must not push the folder's own path toward that limit.
    script = tmp_path / "litterer.py"
    script.write_text(LITTERER)
    preset = dataclasses.replace(
        PRESETS["claude"], binary=sys.executable, template=(sys.executable, str(script))
    )
    state_dir = tmp_path / "state"
    ran = run_cli_agent(
        local_host,
        preset,
        session="agent-harness-" + "a-very-long-plan-name-" * 4 + "T12-attempt-3",
        workdir=work,
        prompt="Fix the bug.",
        state_dir=state_dir,
        home=state_dir / "agent-home",
        env_source=base_env(),
        timeout_s=60,
        idle_s=30,
        poll_s=0.02,
    )
    assert ran.outcome.state is AgentState.DONE, ran.outcome.reason
    own = json.loads((work / "seen.json").read_text())["TMPDIR"]
    assert len(own) - len(str(state_dir)) <= 16
