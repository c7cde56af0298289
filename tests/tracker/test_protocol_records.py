"""The tracker's records on their own: what GitHub's words mean to the harness."""

from __future__ import annotations

import pytest

from agent_harness.tracker.protocol import PullFeedback

pytestmark = pytest.mark.unit


def _feedback(*conclusions: str) -> PullFeedback:
    checks = tuple((f"check-{i}", word, "") for i, word in enumerate(conclusions))
    return PullFeedback(number=1, head_sha="a" * 40, base_ref="main", mergeable_state="clean",
                        checks=checks)  # fmt: skip


@pytest.mark.parametrize("word", ["action_required", "cancelled", "stale", "startup_failure"])
def test_a_check_that_waits_on_a_person_is_neither_the_agents_work_nor_green(word: str) -> None:
    # Each of these spent a round of the agent's budget, which no change of code can answer.
    feedback = _feedback("success", word)
    assert feedback.failing() == [] and not feedback.passing()


@pytest.mark.parametrize("word", ["failure", "timed_out"])
def test_a_failed_or_timed_out_check_is_the_agents_to_answer(word: str) -> None:
    feedback = _feedback("success", word)
    assert [c[1] for c in feedback.failing()] == [word] and not feedback.passing()


def test_green_is_every_check_finished_green_and_pending_is_not() -> None:
    assert _feedback("success", "neutral", "skipped").passing()
    assert not _feedback("success", "").passing() and _feedback("success", "").failing() == []
    assert not _feedback().passing()
