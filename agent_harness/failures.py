"""The failure policy: every class of failure, and the one thing the harness does about it.

Classify before you retry. Whoever meets a failure (the model client, an implementer, the
reviewer, the pipeline) names its class; this table alone says whether another try can help,
so no attempt is spent on a failure that another attempt cannot fix, and no spent cap is ever
asked again. Changing what the harness does about a failure is a change to this table.
"""

from __future__ import annotations

from enum import StrEnum


class Action(StrEnum):
    """What happens after a failure of a given class."""

    RETRY = "retry"  # transient: try again after a backoff (a model call), or a new attempt
    PARK = "park"  # wait for a known time without spending an attempt
    FAIL = "fail"  # another attempt cannot help: the item fails after this attempt
    ESCALATE = "escalate"  # only a person can fix it (raise a cap, renew a login): stop and say


class FailureClass(StrEnum):
    """Every class of failure the harness tells apart."""

    # what a model provider (or an agent CLI's provider) said; see models.providers
    BURST = "burst"
    WINDOW = "window"
    CAP = "cap"
    OVERLOAD = "overload"
    SERVER = "server"
    REFUSAL = "refusal"
    AUTH = "auth"
    CONTEXT_TOO_LONG = "context_too_long"
    BAD_REQUEST = "bad_request"
    # how an implementer's run ended
    AGENT_CRASHED = "agent_crashed"
    AGENT_TIMEOUT = "agent_timeout"
    MISSING_PROGRAM = "missing_program"
    PERMISSION_DENIED = "permission_denied"  # the agent's own tool permissions refused its work
    NO_CHANGE = "no_change"
    AGENT_GAVE_UP = "agent_gave_up"  # the implementer says another attempt cannot help
    # what the gates and the reviewer said about the work
    CHECK_FAILED = "check_failed"
    REVIEW_REFUSED = "review_refused"
    REVIEW_REFUSED_FOR_GOOD = "review_refused_for_good"
    PROTECTED_PATH = "protected_path"
    SECRET_IN_CHANGE = "secret_in_change"
    OVER_BUDGET = "over_budget"
    REVIEWER_UNAVAILABLE = "reviewer_unavailable"
    # the harness's own machinery
    TRACKER = "tracker"  # a tracker or git error of the harness's own
    TRACKER_UNAVAILABLE = "tracker_unavailable"  # 5xx, timeouts, rate limits outlasting retries
    TRACKER_REFUSED = "tracker_refused"  # a 4xx that will answer the same next time
    TRACKER_AUTH = "tracker_auth"  # the token is bad, lacks a permission, or the repo is gone
    LEASE_LOST = "lease_lost"


POLICY: dict[FailureClass, Action] = {
    FailureClass.BURST: Action.RETRY,
    FailureClass.WINDOW: Action.PARK,
    FailureClass.CAP: Action.ESCALATE,
    FailureClass.OVERLOAD: Action.RETRY,
    FailureClass.SERVER: Action.RETRY,
    FailureClass.REFUSAL: Action.FAIL,
    FailureClass.AUTH: Action.ESCALATE,
    FailureClass.CONTEXT_TOO_LONG: Action.FAIL,
    FailureClass.BAD_REQUEST: Action.FAIL,
    FailureClass.AGENT_CRASHED: Action.RETRY,
    FailureClass.AGENT_TIMEOUT: Action.RETRY,
    FailureClass.MISSING_PROGRAM: Action.FAIL,
    FailureClass.PERMISSION_DENIED: Action.FAIL,
    FailureClass.NO_CHANGE: Action.RETRY,
    FailureClass.AGENT_GAVE_UP: Action.FAIL,
    FailureClass.CHECK_FAILED: Action.RETRY,
    FailureClass.REVIEW_REFUSED: Action.RETRY,
    FailureClass.REVIEW_REFUSED_FOR_GOOD: Action.FAIL,
    FailureClass.PROTECTED_PATH: Action.FAIL,
    FailureClass.SECRET_IN_CHANGE: Action.FAIL,
    FailureClass.OVER_BUDGET: Action.FAIL,
    FailureClass.REVIEWER_UNAVAILABLE: Action.PARK,
    FailureClass.TRACKER: Action.RETRY,
    FailureClass.TRACKER_UNAVAILABLE: Action.PARK,
    FailureClass.TRACKER_REFUSED: Action.FAIL,
    FailureClass.TRACKER_AUTH: Action.ESCALATE,
    FailureClass.LEASE_LOST: Action.RETRY,
}


def action_for(failure: FailureClass | str) -> Action:
    """What to do about a failure of this class."""
    return POLICY[FailureClass(failure)]


def can_retry(failure: FailureClass | str) -> bool:
    """Whether trying again (after a wait, or with a new attempt) can help."""
    return action_for(failure) is Action.RETRY


def ends_the_item(failure: FailureClass | str) -> bool:
    """Whether the item fails now, whatever attempts it has left (it needs a fix or a person)."""
    return action_for(failure) in (Action.FAIL, Action.ESCALATE)
