"""The demo in a folder whose name is not UTF-8 (a Latin-1 `démo`): paths are bytes on Linux,
and the harness must carry them to git, the forge and back as the bytes they are."""

from __future__ import annotations

from pathlib import Path

import pytest

from agent_harness.demo.run import run_demo
from agent_harness.sessions.headless import HeadlessHost

pytestmark = [pytest.mark.integration, pytest.mark.slow]


def test_the_demo_merges_every_item_in_a_folder_named_in_latin1(tmp_path: Path) -> None:
    # Before: the forge's port guess and the run's lock name failed to encode the name (exit
    # 70), and a worktree's link back to the clone, read as UTF-8 with replacements, led
    # "outside the clone": every attempt of every item failed.
    workdir = tmp_path / "d\udce9mo"
    report = run_demo(workdir, step=lambda _said: None, host=HeadlessHost(tmp_path / "sessions"))
    states = {row["id"]: row["state"] for row in report.final_items()}
    assert states == {
        "T1": "merged", "T2": "merged", "T3": "done", "T4": "merged", "T5": "merged",
        "T6": "merged", "T7": "merged",
    }  # fmt: skip
    assert (workdir / "tally" / ".git").is_dir()
