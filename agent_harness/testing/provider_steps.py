"""What a scenario makes a scripted model do (write, edit, run, say, fail, hang), and what it sees
of each request (`Exchange`), whatever vendor's wire format carried it."""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from agent_harness.testing.scripted_turns import ScriptedFailure

# -- what a scenario can make the model do ------------------------------------------------------


@dataclass(frozen=True)
class WriteFile:
    """Create (or overwrite) a file, with a path relative to the agent's working directory."""

    path: str
    content: str


@dataclass(frozen=True)
class EditFile:
    """Replace `old` (whole lines, present in the file) with `new`."""

    path: str
    old: str
    new: str


@dataclass(frozen=True)
class RunShell:
    """Run a shell command in the agent's working directory."""

    command: str


@dataclass(frozen=True)
class Say:
    """Answer with text and end the turn."""

    text: str


@dataclass(frozen=True)
class Fail:
    """Answer with this exact HTTP failure (status, headers, body)."""

    failure: ScriptedFailure


@dataclass(frozen=True)
class Hang:
    """Hold the request, answering nothing, like a model that stalls mid-item.

    When `release` is set the request is answered with `then` (a reset without one); when the
    provider closes or `max_s` passes, the connection is reset.
    """

    max_s: float = 60.0
    release: threading.Event | None = None
    then: WriteFile | EditFile | RunShell | Say | None = None


Action = WriteFile | EditFile | RunShell | Say  # what the model answers with
Step = Action | Fail | Hang


def verdict(approved: bool, reasons: Sequence[str] = (), permanent: bool = False) -> Say:
    """A reviewer's structured verdict as the model's final text."""
    body = {"approved": approved, "reasons": list(reasons), "permanent": permanent}
    return Say(json.dumps(body))


# -- what a scenario sees of a request ------------------------------------------------------


@dataclass(frozen=True)
class Exchange:
    """One model request, read the way a scenario needs it."""

    vendor: str  # "anthropic" | "openai" | "gemini" | "chat"
    body: Mapping[str, Any]
    tools: tuple[str, ...]  # the tool names offered
    turn: int  # model turns already in the conversation (0: the first call)
    user_text: str  # everything the user side said, joined
    tool_outputs: tuple[str, ...]  # what the tools returned so far, oldest first
    cwd: str | None  # the working directory the agent announced, when it did

    @property
    def side(self) -> bool:
        """A request with no tools offered: a CLI's own side call (titles, probes, ...). aider
        offers no tools at all (it reads edits from the text), so it has no side calls."""
        return not self.tools and self.vendor != "chat"

    @property
    def text(self) -> str:
        """The whole request body as text, for `in` checks."""
        return json.dumps(self.body)


Scenario = Callable[[Exchange], Step]


def script(*steps: Step, then: Step = Say("Done.")) -> Scenario:
    """A scenario that plays `steps` in conversation order, then `then`; side calls get text."""

    def play(exchange: Exchange) -> Step:
        if exchange.side:
            return Say("Scripted side answer.")
        return steps[exchange.turn] if exchange.turn < len(steps) else then

    return play
