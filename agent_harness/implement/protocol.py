"""The Implementer protocol: what the pipeline asks of whatever does an item's work."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from agent_harness.store.events import USAGE_FROM_AGENT

if TYPE_CHECKING:
    from agent_harness.git.worktrees import Worktree
    from agent_harness.models.failures import Failure
    from agent_harness.plan.model import WorkItem
    from agent_harness.store.payload import Payload


StateCallback = Callable[[str, str], None]

# A typed event of the implementer's own (the executor's steps), stored on the item.
EventCallback = Callable[["Payload"], None]

# How an implementer ended that stopped before a call its allowance could not pay for.
OVER_BUDGET = "over_budget"


@dataclass(frozen=True)
class ImplementResult:
    """How one implementation attempt ended."""

    ok: bool  # the implementer finished normally; whether it changed anything is checked later
    state: str  # done | crashed | timeout | rate_limited | missing_binary | refused | blocked
    # | over_budget
    reason: str
    failure: Failure | None = None
    wait_until: float | None = None  # epoch seconds; set when a spent window should be waited out
    permanent: bool = False  # retrying will not help (a spent cap, a missing binary, ...)
    tokens_in: int | None = None
    tokens_out: int | None = None
    cost_usd: float | None = None
    output_tail: str = ""
    # A model endpoint the run found parked, already recorded where every worker sees it: the
    # item waits for that endpoint, and the implementer itself is not parked.
    parked_endpoint: str | None = None
    # Where the run's usage is recorded: "agent", the figures above (a CLI agent's report,
    # perhaps none); "calls", a `model.call` event per call of the implementer's own client.
    usage_from: str = USAGE_FROM_AGENT


class Implementer(Protocol):
    """Anything that can try to do a work item in a worktree."""

    name: str
    vendor: str

    def implement(
        self,
        item: WorkItem,
        tree: Worktree,
        prompt: str,
        *,
        session: str,
        state_dir: Path,
        on_state: StateCallback,
        feedback: str | None = None,
        on_event: EventCallback | None = None,
        resume: bool = False,
        allowance_usd: float | None = None,
    ) -> ImplementResult:
        """Do the item in `tree`. `prompt` says everything, including `feedback`: what the
        previous attempt ran into (a failed check, the reviewer's no), which an implementer
        that keeps its own state (the direct-API executor) must act on, not resume past.

        `resume`: this attempt already started the implementer under `session` and its worker
        died before the end was recorded. A session still there, alive or ended, is that run:
        it is watched to its end (or its end is read), not started again.

        `allowance_usd`: what this run may spend (what the item's and the run's budgets have
        left). An implementer that pays call by call (the direct-API executor) makes no call
        that could pass it, and ends `OVER_BUDGET` instead; a CLI agent, paid by the run,
        was checked against it before it started."""
        ...
