"""What a run is told (budgets, switches) and how it refuses or stops, shared by every stage.

`RunSettings` is filled by the CLI from config and flags; the stages only read it. An observer
hears every event as it is recorded (and a few notes that are never stored), typed.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from agent_harness.errors import HarnessError
from agent_harness.store.events import Payload

# (kind, item id, payload): the live view and --json lines listen here.
Observer = Callable[[str, str, Payload], None]


class RunInterrupted(HarnessError):
    """interrupted: items in flight keep their leases, and agents keep running in their
    sessions; run the same command again to take them back"""

    exit_code = 130

    @classmethod
    def after(cls, checks_stopped: int) -> RunInterrupted:
        """Said with the checks the interrupt stopped, when it stopped any."""
        if not checks_stopped:
            return cls()
        stopped = "1 check" if checks_stopped == 1 else f"{checks_stopped} checks"
        return cls(
            "interrupted: items in flight keep their leases, and agents keep running in their "
            f"sessions ({stopped} stopped, to run again); run the same command again to take "
            "them back"
        )


class RunRefused(HarnessError):
    """The run cannot start as configured."""

    exit_code = 2


@dataclass
class RunSettings:
    """Budgets and switches of one run (the CLI fills it from config and flags)."""

    checks: list[str] = field(default_factory=list)
    check_timeout_s: float = 600.0
    max_attempts: int = 3
    lease_s: float = 300.0
    workers: int = 1
    protected: list[str] = field(default_factory=lambda: [".github/**", "agent-harness.toml"])
    # The largest file a change may hold: GitHub refuses a push with a file over 100 MiB.
    largest_file_bytes: int = 100 * 1024 * 1024
    allow_same_vendor: bool = False
    item_cost_usd: float | None = None
    run_cost_usd: float | None = None
    max_call_usd: float | None = None  # the bound on one call, with the largest seen so far
    only: set[str] | None = None
    reconcile: bool = True  # pull merged / closed / reverted back before claiming anything
    requeue_reverted: bool = False
    revert_window_days: int = 30
    worker_prefix: str | None = None  # default: this host and state dir, stable across restarts
    idle_poll_s: float = 0.2
    check_env_pass: list[str] = field(default_factory=list)  # secret-looking names checks get
    secret_shapes_ignored_in: list[str] = field(default_factory=list)  # globs: fixtures
    wait_for_others: bool = True  # wait out other hosts' leases before ending the run
    max_pr_rounds: int = 3  # rounds after the PR opened (failed CI, reviews, conflicts)
    merge_when_green: bool = False  # merge an approved, green, conflict-free PR
