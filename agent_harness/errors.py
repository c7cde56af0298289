"""The one exception root of the harness and the exit codes it maps to.

Every error a user can cause or meet is a `HarnessError`; its `str()` is a single line fit to
print, and `exit_code` is what the CLI returns. Anything else escaping to the CLI is a bug.
"""

from __future__ import annotations

# What reading JSON written by someone else raises when it cannot be read: the decoder's own
# error, a number past Python's 4300-digit limit for integers (both ValueErrors, as a
# UnicodeDecodeError is) and nesting past the recursion limit (RecursionError).
UNREADABLE_JSON: tuple[type[Exception], ...] = (ValueError, RecursionError)


class HarnessError(Exception):
    """agent-harness failed."""

    exit_code: int = 1

    def __init__(self, message: str | None = None) -> None:
        super().__init__(message or (self.__doc__ or "agent-harness failed").strip())

    @property
    def message(self) -> str:
        return " ".join(str(self).split())


class UsageError(HarnessError):
    """The command was given input it cannot use."""

    exit_code = 2


class ConfigError(HarnessError):
    """The configuration could not be read."""

    exit_code = 2


class InputError(HarnessError):
    """An input file could not be read."""

    exit_code = 2


class PlanRefused(HarnessError):
    """The plan was refused."""

    exit_code = 3
