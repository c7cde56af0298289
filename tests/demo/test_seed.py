"""The demo's repository seed over real git: a git refusal stops the demo in git's own words."""

from __future__ import annotations

from pathlib import Path

import pytest

from agent_harness.demo.run import seed_repository
from agent_harness.errors import HarnessError

pytestmark = pytest.mark.integration


def test_a_push_git_refuses_stops_the_demo_saying_where_and_why(tmp_path: Path) -> None:
    project = tmp_path / "project"
    project.mkdir()
    (project / "README.md").write_text("tally\n")
    nowhere = tmp_path / "nowhere.git"
    with pytest.raises(HarnessError) as failed:
        seed_repository(project, str(nowhere), tmp_path / "demo" / "work")
    seed = tmp_path / "demo" / "seed"
    assert failed.value.message == (
        f"demo: git push --quiet failed in {seed}: "
        f"'{nowhere}' does not appear to be a git repository; "
        "Could not read from remote repository."
    )
    assert not (tmp_path / "demo" / "work").exists()  # nothing cloned from a failed seed
