"""The verifier: a step is done when its check passes, as decided by a machine, never a model.

A check is a shell command, a file that must exist, or a pattern that must match; each gives
a `Verdict` whose reason is what the implementer is told next time, and whose `permanent`
flag says whether trying the same step again could ever help.
"""

from __future__ import annotations

import os
import re
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from agent_harness.implement.steps import Check
from agent_harness.secrets.process import process_env
from agent_harness.secrets.redact import masked_output
from agent_harness.sessions.groups import run_in_group

# Output of a failed check handed back to the implementer; the tail is where the error is.
FEEDBACK_CHARS = 2000


@dataclass(frozen=True)
class Verdict:
    """The verifier's answer. `permanent` means retrying the same step cannot help."""

    passed: bool
    reason: str
    permanent: bool = False


def _tail(text: str, limit: int = FEEDBACK_CHARS) -> str:
    """The end of a check's output, credentials masked: a check that read one (from a parent
    process's environment, a file) would otherwise put it in the step plan, the events and the
    next prompt to the provider."""
    # Masked before it is cut: no key cut in half.
    text = masked_output(text.strip()[-4 * limit :])
    return text if len(text) <= limit else "…" + text[-limit:]


def run_command(
    command: str,
    worktree: Path,
    env: Mapping[str, str],
    timeout_s: float,
    group_file: Path | None = None,
) -> Verdict:
    """Run one check command through the shell; exit 0 passes.

    It runs as the run's own checks do (`sessions.groups`): in a process group of its own that
    a timeout ends whole, written to `group_file` while it runs, so that a run killed outright
    leaves nothing working in the worktree past the item's next attempt (or, under GNU
    `timeout`, past its own limit). Exit 126 and 127 (not executable, not found) are
    permanent: the check itself is broken.
    """
    with tempfile.TemporaryFile() as sink:
        try:
            end = run_in_group(
                command, worktree, env=env, timeout_s=timeout_s, output=sink, group_file=group_file
            )
        except OSError as exc:
            return Verdict(False, f"`{command}` could not start: {exc.strerror}", permanent=True)
        size = sink.seek(0, os.SEEK_END)
        sink.seek(max(0, size - 8 * FEEDBACK_CHARS))
        output = _tail(sink.read().decode("utf-8", "replace"))
    if end.timed_out:
        return Verdict(False, f"`{command}` did not finish in {timeout_s:g}s. Output:\n{output}")
    if end.exit_code == 0:
        return Verdict(True, f"`{command}` exited 0")
    permanent = end.exit_code in (126, 127)
    why = " (the command cannot run)" if permanent else ""
    return Verdict(
        False,
        f"`{command}` exited {end.exit_code}{why}. Output:\n{output or '(none)'}",
        permanent=permanent,
    )


def verify(
    check: Check,
    worktree: Path,
    *,
    item_checks: Sequence[str] = (),
    env: Mapping[str, str] | None = None,
    command_env: Mapping[str, str] | None = None,
    timeout_s: float = 300.0,
    group_file: Path | None = None,
) -> Verdict:
    """Decide a step mechanically from its check; no model is asked. The item's own checks
    run in `env`; a command the model wrote in `command_env` (default: `env` too). A command's
    process group is written to `group_file` while it runs (see `run_command`)."""
    environment = process_env() if env is None else env
    if check.kind == "command":
        own = environment if command_env is None else command_env
        return run_command(check.command or "", worktree, own, timeout_s, group_file)
    if check.kind == "item_checks":
        if not item_checks:
            return Verdict(False, "the item has no check commands configured", permanent=True)
        for command in item_checks:
            verdict = run_command(command, worktree, environment, timeout_s, group_file)
            if not verdict.passed:
                return verdict
        return Verdict(True, f"all {len(item_checks)} item check(s) passed")
    path = check.path or ""
    target = worktree / path
    if check.kind == "file_exists":
        if target.exists():
            return Verdict(True, f"{path} exists")
        return Verdict(False, f"{path} does not exist")
    try:
        text = target.read_text(encoding="utf-8", errors="replace")
    except OSError as exc:
        return Verdict(False, f"{path} cannot be read ({exc.strerror or 'missing'})")
    if re.search(check.pattern or "", text, re.MULTILINE):
        return Verdict(True, f"/{check.pattern}/ matches in {path}")
    return Verdict(False, f"/{check.pattern}/ does not match anywhere in {path}")
