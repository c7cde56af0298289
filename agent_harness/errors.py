"""The one exception root of the harness and the exit codes it maps to.

Every error a user can cause or meet is a `HarnessError`; its `str()` is a single line fit to
print, and `exit_code` is what the CLI returns. Anything else escaping to the CLI is a bug.
"""

from __future__ import annotations

import json
import re
from typing import Any

# What reading JSON written by someone else raises when it cannot be read: the decoder's own
# error, a number past Python's 4300-digit limit for integers (both ValueErrors, as a
# UnicodeDecodeError is) and nesting past the recursion limit (RecursionError).
UNREADABLE_JSON: tuple[type[Exception], ...] = (ValueError, RecursionError)

# A lone surrogate: written as an escape (`\ud800`), or already in the text (a file decoded
# with "surrogateescape"). Only text that matches is checked further.
_MAYBE_SURROGATE = re.compile("[\ud800-\udfff]|\\\\[uU][dD][89a-fA-F]")
_MAYBE_SURROGATE_BYTES = re.compile(rb"\\[uU][dD][89a-fA-F]")


def read_json(text: str | bytes) -> Any:
    """JSON written by someone else, read as JSON defines it; raises one of `UNREADABLE_JSON`.

    Python's reader also takes `NaN` and `Infinity`, which JSON has not (a cost of NaN would
    pass every budget check, since nothing compares greater than it), and an escape of half a
    surrogate pair (`"\\ud800"`), which no UTF-8 text can hold: whatever stores, prints or
    sends such a string later fails. Both are refused here as malformed JSON is."""
    value = json.loads(text, parse_constant=_not_a_json_number)
    pattern = _MAYBE_SURROGATE_BYTES if isinstance(text, bytes) else _MAYBE_SURROGATE
    if pattern.search(text):  # type: ignore[arg-type]
        try:
            json.dumps(value, ensure_ascii=False).encode("utf-8")
        except UnicodeEncodeError as exc:
            code = ord(str(exc.object)[exc.start])
            raise ValueError(
                f"a lone surrogate (\\u{code:04x}) that no UTF-8 text can hold"
            ) from None
    return value


def _not_a_json_number(constant: str) -> Any:
    raise ValueError(f"{constant} is not a JSON number")


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
