"""The failure policy: every class of failure, and the one thing the harness does about it.

Classify before you retry. Whoever meets a failure (the model client, an implementer, the
reviewer, the pipeline) names its class; this table alone says whether another try can help,
so no attempt is spent on a failure that another attempt cannot fix, and no spent cap is ever
asked again: it parks its endpoint, for every worker and item, until a person clears it.
Changing what the harness does about a failure is a change to this table.
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
    CONFLICT_LEFT = "conflict_left"
    OVER_BUDGET = "over_budget"
    REVIEWER_UNAVAILABLE = "reviewer_unavailable"
    # the harness's own machinery
    TRACKER = "tracker"  # a tracker or git error of the harness's own
    # the user's clone refuses the work as it is set up (a commit git will not make, a branch of
    # someone else's in the item's name): a person must change the clone, not another attempt
    REPOSITORY = "repository"
    TRACKER_UNAVAILABLE = "tracker_unavailable"  # 5xx, timeouts, rate limits outlasting retries
    TRACKER_REFUSED = "tracker_refused"  # a 4xx that will answer the same next time
    TRACKER_AUTH = "tracker_auth"  # the token lacks a permission, or the repo is gone
    TRACKER_CREDENTIALS = "tracker_credentials"  # 401: the token stopped working, for everyone
    LEASE_LOST = "lease_lost"


POLICY: dict[FailureClass, Action] = {
    FailureClass.BURST: Action.RETRY,
    FailureClass.WINDOW: Action.PARK,
    FailureClass.CAP: Action.PARK,
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
    FailureClass.PROTECTED_PATH: Action.RETRY,
    FailureClass.SECRET_IN_CHANGE: Action.FAIL,
    FailureClass.CONFLICT_LEFT: Action.RETRY,
    FailureClass.OVER_BUDGET: Action.FAIL,
    FailureClass.REVIEWER_UNAVAILABLE: Action.PARK,
    FailureClass.TRACKER: Action.RETRY,
    FailureClass.REPOSITORY: Action.FAIL,
    FailureClass.TRACKER_UNAVAILABLE: Action.PARK,
    FailureClass.TRACKER_REFUSED: Action.FAIL,
    FailureClass.TRACKER_AUTH: Action.ESCALATE,
    FailureClass.TRACKER_CREDENTIALS: Action.PARK,
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


ACTION_MEANS: dict[Action, str] = {
    Action.RETRY: "try again: a model call after a jittered backoff, an item with a new attempt",
    Action.PARK: (
        "the item waits, no attempt spent: for a stated reset, or (a spent cap) until a person "
        "clears it with `agent-harness work unpark ENDPOINT`"
    ),
    Action.FAIL: "the item fails after this attempt; another would fail the same way",
    Action.ESCALATE: "the item fails and names what a person must do (raise a cap, renew a key)",
}

MEANING: dict[FailureClass, str] = {
    FailureClass.BURST: "a short rate limit (per minute or second)",
    FailureClass.WINDOW: "a rolling usage window is spent (hours, a day, a week)",
    FailureClass.CAP: "a spend limit, credit balance or quota is used up",
    FailureClass.OVERLOAD: "the provider is busy for everyone",
    FailureClass.SERVER: "a 5xx, a malformed or empty answer, a dropped connection, a timeout",
    FailureClass.REFUSAL: "the provider refused the content",
    FailureClass.AUTH: "a bad key, or an account without access",
    FailureClass.CONTEXT_TOO_LONG: "the input is too big for the model",
    FailureClass.BAD_REQUEST: "the request itself is malformed",
    FailureClass.AGENT_CRASHED: "the agent exited non-zero with no provider failure to name",
    FailureClass.AGENT_TIMEOUT: "the agent ran past its time or sat idle too long",
    FailureClass.MISSING_PROGRAM: "a program the work needs is not installed",
    FailureClass.PERMISSION_DENIED: "the agent's own tool permissions refused its edits",
    FailureClass.NO_CHANGE: "the agent finished without changing anything",
    FailureClass.AGENT_GAVE_UP: "the implementer says another attempt cannot help",
    FailureClass.CHECK_FAILED: "a check failed on the agent's work",
    FailureClass.REVIEW_REFUSED: "the reviewer said no, with reasons to fix",
    FailureClass.REVIEW_REFUSED_FOR_GOOD: "the reviewer said no to the item itself",
    FailureClass.PROTECTED_PATH: "the change touches a protected path (told, on a new branch)",
    FailureClass.SECRET_IN_CHANGE: "the change carries something shaped like a secret",
    FailureClass.CONFLICT_LEFT: "the change still holds a merge conflict's markers",
    FailureClass.OVER_BUDGET: "the item's cost budget is spent",
    FailureClass.REVIEWER_UNAVAILABLE: "the reviewer could not answer (limited, down, no reply)",
    FailureClass.TRACKER: "a git or tracker error of the harness's own machinery",
    FailureClass.REPOSITORY: (
        "the clone refuses the work as it is set up (a commit git will not make, say a "
        "signature it cannot sign; a branch of someone else's in the item's name)"
    ),
    FailureClass.TRACKER_UNAVAILABLE: "the tracker is down, slow or rate limited past the retries",
    FailureClass.TRACKER_REFUSED: "the tracker refused a write that will be refused again (4xx)",
    FailureClass.TRACKER_AUTH: "the token lacks a permission, or the repository is gone",
    FailureClass.TRACKER_CREDENTIALS: (
        "the tracker answered 401 (bad credentials): no item can be delivered, so the run "
        "stops, saying so, and the work waits for a run with a good token"
    ),
    FailureClass.LEASE_LOST: "another worker took the item over after this one's lease lapsed",
}


def policy_table() -> str:
    """The policy as a markdown table, for docs/PROVIDERS.md (a test keeps the two the same)."""
    rows = ["| class | what happened | action | what the action does |", "|---|---|---|---|"]
    for failure in FailureClass:
        action = POLICY[failure]
        rows.append(f"| `{failure}` | {MEANING[failure]} | {action} | {ACTION_MEANS[action]} |")
    return "\n".join(rows) + "\n"


if __name__ == "__main__":  # python -m agent_harness.failures
    import sys

    sys.stdout.write(policy_table())
