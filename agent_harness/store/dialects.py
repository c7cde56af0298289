"""The two SQL engines, told apart: placeholders, row locks, and URLs fit to show.

Modules write SQL with `?` placeholders and never see the driver; the dialect turns them into
what psycopg wants, and a PostgreSQL URL is shown with its password masked.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from urllib.parse import urlsplit, urlunsplit


@dataclass(frozen=True)
class Dialect:
    """The few places where the SQL of the two engines differs."""

    name: str
    lock_rows: str  # appended to a SELECT that reads rows it will change
    skip_locked: str  # appended to a SELECT that picks one free row among many

    def sql(self, text: str) -> str:
        if self.name != "postgresql":
            return text
        return _pyformat(text)


@functools.lru_cache(maxsize=4096)
def _pyformat(text: str) -> str:
    """`?` placeholders as psycopg wants them; cached, as the same few texts come back."""
    return text.replace("%", "%%").replace("?", "%s")


SQLITE = Dialect("sqlite", lock_rows="", skip_locked="")


POSTGRES = Dialect("postgresql", lock_rows=" FOR UPDATE", skip_locked=" FOR UPDATE SKIP LOCKED")


def redact(url: str) -> str:
    parts = urlsplit(url)
    if parts.password is None:
        return url
    host = parts.hostname or ""
    netloc = f"{parts.username}:***@{host}" + (f":{parts.port}" if parts.port else "")
    return urlunsplit(parts._replace(netloc=netloc))
