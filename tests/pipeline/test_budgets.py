"""Money as a person reads it, in the PR body, the run summary and budget refusals."""

from __future__ import annotations

import pytest

from agent_harness.pipeline.budgets import format_usd

pytestmark = pytest.mark.unit


@pytest.mark.parametrize(
    ("value", "shown"),
    [
        (None, "unknown"),
        (0.0, "$0.00"),
        (0.00007 * 2, "$0.00014"),
        (0.1 + 0.2, "$0.30"),
        (0.004999, "$0.0050"),
        (0.0000012345, "$0.0000012"),
        (12345.678, "$12,345.68"),
        (0.01, "$0.01"),
    ],
)
def test_money_is_shown_without_float_noise(value: float | None, shown: str) -> None:
    assert format_usd(value) == shown
