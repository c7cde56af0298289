"""The verifier: a step is done when its check passes, as decided by a machine, never a model.

A check is a shell command, a file that must exist, or a pattern that must match; each gives
a `Verdict` whose reason is what the implementer is told next time, and whose `permanent`
flag says whether trying the same step again could ever help.
"""

from __future__ import annotations

import contextlib
import os
import re
import signal
import subprocess
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from agent_harness.implement.steps import Check
from agent_harness.secrets.process import process_env
from agent_harness.secrets.redact import masked_output

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


def run_command(command: str, worktree: Path, env: Mapping[str, str], timeout_s: float) -> Verdict:
    """Run one check command through the shell; exit 0 passes.

    The command gets its own process group so a timeout kills what it started too. Exit 126
    and 127 (not executable, not found) are permanent: the check itself is broken.
    """
    try:
        proc = subprocess.Popen(
            ["/bin/sh", "-c", command],
            cwd=worktree,
            env=dict(env),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    except OSError as exc:
        return Verdict(False, f"`{command}` could not start: {exc.strerror}", permanent=True)
    try:
        out, _ = proc.communicate(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        out, _ = proc.communicate()
        shown = _tail(out.decode("utf-8", "replace"))
        return Verdict(False, f"`{command}` did not finish in {timeout_s:g}s. Output:\n{shown}")
    output = _tail(out.decode("utf-8", "replace"))
    if proc.returncode == 0:
        return Verdict(True, f"`{command}` exited 0")
    permanent = proc.returncode in (126, 127)
    why = " (the command cannot run)" if permanent else ""
    return Verdict(
        False,
        f"`{command}` exited {proc.returncode}{why}. Output:\n{output or '(none)'}",
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
) -> Verdict:
    """Decide a step mechanically from its check; no model is asked. The item's own checks
    run in `env`; a command the model wrote in `command_env` (default: `env` too)."""
    environment = process_env() if env is None else env
    if check.kind == "command":
        own = environment if command_env is None else command_env
        return run_command(check.command or "", worktree, own, timeout_s)
    if check.kind == "item_checks":
        if not item_checks:
            return Verdict(False, "the item has no check commands configured", permanent=True)
        for command in item_checks:
            verdict = run_command(command, worktree, environment, timeout_s)
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
