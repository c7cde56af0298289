"""Which failures of committing the agent's work another attempt would meet again."""

from __future__ import annotations

import pytest

from agent_harness.git.errors import RepoRefused, WorktreeError, refused_or_not

pytestmark = pytest.mark.unit


@pytest.mark.parametrize(
    ("said", "fix"),
    [
        ("gpg failed to sign the data; failed to write commit object", "commit.gpgsign false"),
        ("LF would be replaced by CRLF in notes/T1.txt", "core.safecrlf"),
        ("external filter 'git-lfs filter-process' failed", "install the filter"),
    ],
)
def test_what_the_clones_setup_refuses_fails_the_item_once(said: str, fix: str) -> None:
    refused = refused_or_not(f"git commit failed in /w: {said}")
    assert isinstance(refused, RepoRefused) and fix in refused.message


@pytest.mark.parametrize(
    "said",
    [
        "'sub/' does not have a commit checked out; adding files failed",  # the agent's doing
        "unable to write new index file: No space left on device",
        "Unable to create '/w/.git/index.lock': File exists.",
    ],
)
def test_other_failures_are_tried_again_not_blamed_on_the_clone(said: str) -> None:
    failed = refused_or_not(f"git add failed in /w: {said}")
    assert type(failed) is WorktreeError and "gpgsign" not in failed.message
