"""Creating something on the tracker exactly once, when an answer can be lost on the way back.

A create whose answer timed out (or came back 5xx) may still land: the server can be working
on it while the client gives up. Looking at once finds nothing and resending makes a twin. So
the in-flight window is waited out before looking, the tracker is looked at more than once,
and only then is the create sent again, after a jittered backoff; the total is bounded.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TypeVar

from agent_harness.tracker.protocol import TrackerError, WriteUncertain

T = TypeVar("T")


@dataclass
class Pace:
    """How long to wait, and how to wait (injected in tests)."""

    settle_s: float = 30.0  # how long a request may still be in flight after the client gave up
    looks: int = 3  # looks before a resend: at once, after settle, after 2 x settle more
    sends: int = 6  # sends of the create in all
    backoff_cap_s: float = 60.0
    sleep: Callable[[float], None] = time.sleep
    rng: random.Random = field(default_factory=random.Random)


class CreateNotConfirmed(TrackerError):
    """A create failed or could not be confirmed, every try; nothing twice was made."""


def create_once(
    create: Callable[[], T], find: Callable[[], T | None], what: str, pace: Pace | None = None
) -> T:
    """`create()` exactly once as far as the tracker can tell: after an uncertain answer,
    `find()` is asked (after waiting out the in-flight window) before anything is sent again."""
    pace = pace or Pace()
    last = ""
    for send in range(pace.sends):
        if send:
            # Full jitter, growing, so a burst of 5xx is outlasted without hammering.
            pace.sleep(pace.rng.uniform(0, min(pace.backoff_cap_s, 2.0**send)))
        try:
            return create()
        except WriteUncertain as exc:
            last = exc.message
            found = _look(find, pace, in_flight=exc.in_flight)
            if found is not None:
                return found
    raise CreateNotConfirmed(f"{what} was not created after {pace.sends} tries; last: {last}")


def _look(find: Callable[[], T | None], pace: Pace, *, in_flight: bool) -> T | None:
    """A write the server answered (a 5xx) is finished one way or the other: one look tells.
    One that got no answer may still be running: look now (it may have finished as the answer
    was lost), then again after waiting out the in-flight window, and once more after that."""
    found = find()
    if found is not None or not in_flight:
        return found
    for look in range(1, pace.looks):
        pace.sleep(pace.settle_s * look)
        found = find()
        if found is not None:
            return found
    return None
