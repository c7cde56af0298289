"""How the harness connects to PostgreSQL: with TCP keepalives, so a link that died notices.

A fleet's hosts reach one PostgreSQL over a network. When that link dies without a word (a
host's network drops, a NAT forgets the connection), a connection waiting on the server, for
a lock or an answer, would otherwise wait for the system's TCP timeouts: hours for an idle
socket. With keepalives probing every few seconds after a short idle time, and a bound on how
long written data may go unacknowledged, the driver raises after about a minute instead, and
the worker's error is a StoreError like any other. A URL that sets any of these keeps its own.
"""

from __future__ import annotations

import re
from typing import Any

from agent_harness.errors import UsageError
from agent_harness.secrets.shapes import mask_url

CONNECT_TIMEOUT_S = 10
# libpq's names; seconds, except tcp_user_timeout (milliseconds).
LINK_OPTIONS: dict[str, int] = {
    "keepalives": 1,
    "keepalives_idle": 30,
    "keepalives_interval": 10,
    "keepalives_count": 3,
    "tcp_user_timeout": 60_000,
}


def connect(url: str) -> Any:
    """A connection to `url` (autocommit), with the link options the URL does not set."""
    import psycopg
    from psycopg.conninfo import conninfo_to_dict

    given = conninfo_to_dict(url)
    options: dict[str, Any] = {k: v for k, v in LINK_OPTIONS.items() if k not in given}
    options.setdefault("connect_timeout", given.get("connect_timeout", CONNECT_TIMEOUT_S))
    return psycopg.connect(url, autocommit=True, **options)


# PostgreSQL's codes for a session the server ended: admin_shutdown (pg_terminate_backend, a
# fast shutdown), crash_shutdown, cannot_connect_now (starting up, or in recovery).
SERVER_ENDED = frozenset({"57P01", "57P02", "57P03"})


KEYWORD_DSN = re.compile(
    r"^\s*(?:host|hostaddr|port|dbname|user|password|service|sslmode|options)\s*=", re.I
)


def refuse_keyword_dsn(url: str) -> None:
    """libpq's keyword form (`host=h dbname=x user=u`) is not a URL: read as a path, it would
    make a SQLite file of that name (and echo any `password=` in it)."""
    if KEYWORD_DSN.match(url):
        raise UsageError(
            f"{mask_url(url)[:200]!r} is libpq's keyword form, which is not read here: write "
            "it as a URL, postgresql://USER@HOST:PORT/DBNAME (and keep a password in "
            "PGPASSWORD or ~/.pgpass, out of the command line); a SQLite file of such a name "
            "is ./NAME or sqlite:///PATH"
        )
