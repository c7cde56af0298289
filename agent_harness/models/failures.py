"""The vocabulary every provider failure is translated into.

A failure is named by the reaction it calls for (wait seconds, park until a reset, stop for a
human), not by the status code it arrived with: every vendor classifier, the CLI-agent output
reader and the model client speak in these `Failure` values, so a reaction is decided once.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from enum import StrEnum

from agent_harness.failures import can_retry, ends_the_item


class FailureKind(StrEnum):
    """What went wrong, named by what the caller should do about it."""

    BURST = "burst"  # short rate limit: wait seconds, retry this worker only
    WINDOW = "window"  # a rolling budget is spent: park the endpoint until its reset
    CAP = "cap"  # spend / credit / billing cap: never retry, a human must act
    OVERLOAD = "overload"  # the provider is busy for everyone: back off and retry
    SERVER = "server"  # 5xx, broken proxy page, dropped connection, timeout: retry a few times
    REFUSAL = "refusal"  # content policy: never resend the same input
    AUTH = "auth"  # bad or missing key, no permission: never retry
    CONTEXT_TOO_LONG = "context_too_long"  # the input must shrink; waiting never helps
    BAD_REQUEST = "bad_request"  # our request is wrong; retrying sends the same mistake


# Which kinds may be retried in-process is the failure policy's to say, not this module's.
RETRYABLE_KINDS = frozenset(kind for kind in FailureKind if can_retry(kind.value))


@dataclass(frozen=True)
class Failure:
    """One classified provider failure.

    `retryable` is true only for burst, overload and server failures: the same request may
    succeed after a jittered wait of at least `retry_after` seconds. A `window` is not retried
    in-process: the endpoint is parked until `reset_at` (epoch seconds). Every other kind is
    final for this input.
    """

    kind: FailureKind
    vendor: str
    status: int | None
    message: str
    reset_at: float | None = None
    retry_after: float | None = None
    raw_code: str | None = None

    @property
    def retryable(self) -> bool:
        return self.kind in RETRYABLE_KINDS

    @property
    def final(self) -> bool:
        """Another try cannot help (the policy fails or escalates this kind)."""
        return ends_the_item(self.kind.value)

    def describe(self) -> str:
        """One line for a user: kind, vendor, status and the provider's own words."""
        status = f" {self.status}" if self.status is not None else ""
        code = f" ({self.raw_code})" if self.raw_code else ""
        return f"{self.kind.value} from {self.vendor}{status}{code}: {self.message}"


Headers = Mapping[str, str]
Body = bytes | str
Classifier = Callable[[int, Headers, Body, float], "Failure | None"]
