"""The one exception root of the harness and the exit codes it maps to.

Every error a user can cause or meet is a `HarnessError`; its `str()` is a single line fit to
print, and `exit_code` is what the CLI returns. Anything else escaping to the CLI is a bug.
"""

from __future__ import annotations

import json
import math
import os
import re
import stat
import tomllib
from pathlib import Path
from typing import Any

# What reading JSON written by someone else raises when it cannot be read: the decoder's own
# error, a number past Python's 4300-digit limit for integers (both ValueErrors, as a
# UnicodeDecodeError is) and nesting past the recursion limit (RecursionError).
UNREADABLE_JSON: tuple[type[Exception], ...] = (ValueError, RecursionError)

# Half a surrogate pair written as an escape (`\ud800` with nothing after it to pair with).
_SURROGATE_ESCAPE = re.compile(r"\\u[dD][89a-fA-F]")


def read_json(text: str | bytes) -> Any:
    """JSON written by someone else, read as JSON defines it; raises one of `UNREADABLE_JSON`.

    Python's reader also takes `NaN`, `Infinity` and numbers like `1e400` that become infinite:
    those are refused, since a cost of NaN or minus infinity would pass every budget check. It
    takes half a surrogate pair too (`"\\ud800"`, which no UTF-8 text can hold, so whatever
    stores, prints or sends the string later fails); agents' CLIs write them when they cut text
    mid-character, so they are read as U+FFFD, the replacement character, not refused."""
    if isinstance(text, bytes):
        # Decoded here, strictly: Python's reader lets UTF-8 bytes of a surrogate through.
        text = text.decode(json.detect_encoding(text))
    value = json.loads(text, parse_constant=_not_a_json_number, parse_float=_finite)
    if ("\\u" in text and _SURROGATE_ESCAPE.search(text)) or not _utf8(text):
        value = without_lone_surrogates(value)
    return value


# A settings file is a few kilobytes; one bigger than this is not what the user meant to name.
MAX_TOML_BYTES = 4 * 1024 * 1024


def read_toml_file(path: Path, error: type[HarnessError]) -> dict[str, Any]:
    """A TOML file written by hand, or `error` with one line saying why it cannot be read: it
    is missing, not a regular file (a pipe would block for ever), too big, not UTF-8, not
    TOML, or nested past the reader's recursion limit (`a = [[[[...`)."""
    try:
        info = os.stat(path)
        if not stat.S_ISREG(info.st_mode):
            what = "a directory" if stat.S_ISDIR(info.st_mode) else "not a regular file"
            raise error(f"{path} is {what}; name a TOML file")
        if info.st_size > MAX_TOML_BYTES:
            raise error(f"{path} is {info.st_size // 1024} KB; a TOML file over 4 MB is refused")
        raw = path.read_bytes()
    except FileNotFoundError:
        raise error(f"{path} not found") from None
    except OSError as exc:
        raise error(f"cannot read {path}: {exc.strerror or exc}") from None
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:  # TOML is UTF-8 text
        raise error(
            f"{path}: not valid TOML (byte 0x{raw[exc.start]:02x} at offset {exc.start} is "
            "not UTF-8)"
        ) from None
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise error(f"{path}: not valid TOML ({exc})") from None
    except RecursionError:
        raise error(f"{path}: not valid TOML (nested too deeply)") from None


def _utf8(text: str) -> bool:
    if text.isascii():
        return True
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def without_lone_surrogates(value: Any) -> Any:
    """`value` (text, or lists and dicts of it) with each half of a surrogate pair as U+FFFD."""
    if isinstance(value, str):
        # A whole pair is already one character; half of one becomes U+FFFD.
        return value.encode("utf-16", "surrogatepass").decode("utf-16", "replace")
    if isinstance(value, list):
        return [without_lone_surrogates(item) for item in value]
    if isinstance(value, dict):
        return {
            without_lone_surrogates(key): without_lone_surrogates(item)
            for key, item in value.items()
        }
    return value


def _not_a_json_number(constant: str) -> Any:
    raise ValueError(f"{constant} is not a JSON number")


def _finite(literal: str) -> float:
    number = float(literal)
    if not math.isfinite(number):
        raise ValueError(f"{literal[:20]} is too large a number")
    return number


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
