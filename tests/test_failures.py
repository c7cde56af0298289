"""The failure policy: one table, and every part that meets a failure reads it."""

from __future__ import annotations

import pytest

from agent_harness.failures import (
    POLICY,
    Action,
    FailureClass,
    action_for,
    can_retry,
    ends_the_item,
)
from agent_harness.implement.protocol import ImplementResult
from agent_harness.models.failures import RETRYABLE_KINDS, Failure, FailureKind
from agent_harness.pipeline.agent_end import result_class

pytestmark = pytest.mark.unit


def test_every_class_has_an_action_and_every_provider_kind_is_a_class() -> None:
    assert set(POLICY) == set(FailureClass)
    assert {kind.value for kind in FailureKind} <= {cls.value for cls in FailureClass}


def test_what_the_model_client_retries_is_what_the_table_says() -> None:
    assert {kind.value for kind in RETRYABLE_KINDS} == {
        cls.value for cls, action in POLICY.items() if action is Action.RETRY
    } & {kind.value for kind in FailureKind}
    cap = Failure(FailureKind.CAP, "anthropic", 429, "credit balance too low")
    # A spent cap is never asked again, and ends no item: its endpoint waits for a person.
    assert not cap.retryable and not cap.final and action_for("cap") is Action.PARK


@pytest.mark.parametrize(
    ("failure", "retry", "ends"),
    [
        (FailureClass.CHECK_FAILED, True, False),
        (FailureClass.REVIEW_REFUSED, True, False),
        (FailureClass.REVIEW_REFUSED_FOR_GOOD, False, True),
        (FailureClass.MISSING_PROGRAM, False, True),
        (FailureClass.SECRET_IN_CHANGE, False, True),
        (FailureClass.WINDOW, False, False),  # parked: waits, spends nothing
        (FailureClass.AUTH, False, True),  # a person must renew the login
    ],
)
def test_the_table_decides_whether_another_attempt_can_help(
    failure: FailureClass, retry: bool, ends: bool
) -> None:
    assert (can_retry(failure), ends_the_item(failure)) == (retry, ends)


def test_an_implementer_s_run_is_classed_by_its_provider_failure_first() -> None:
    cap = Failure(FailureKind.CAP, "openai", 429, "insufficient_quota")
    crashed_on_a_cap = ImplementResult(ok=False, state="crashed", reason="x", failure=cap)
    assert result_class(crashed_on_a_cap) is FailureClass.CAP
    timed_out = ImplementResult(ok=False, state="timeout", reason="x")
    assert result_class(timed_out) is FailureClass.AGENT_TIMEOUT
    gave_up = ImplementResult(ok=False, state="blocked", reason="x", permanent=True)
    assert result_class(gave_up) is FailureClass.AGENT_GAVE_UP
    assert ends_the_item(result_class(gave_up))


def test_providers_md_shows_the_policy_as_the_code_has_it() -> None:
    from pathlib import Path

    from agent_harness.failures import policy_table

    doc = (Path(__file__).resolve().parents[1] / "docs" / "PROVIDERS.md").read_text()
    start = doc.index("-->\n", doc.index("<!-- failure-policy: generated")) + len("-->\n")
    shown = doc[start : doc.index("<!-- failure-policy: end -->")]
    assert shown == policy_table(), (
        "docs/PROVIDERS.md is stale: paste the output of `python -m agent_harness.failures`"
    )
    assert shown.count("\n| `") == len(FailureClass)  # every class has its row
