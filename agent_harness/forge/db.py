"""The forge's SQLite database: users, repositories, issues, pull requests and their parts.

One connection guarded by one lock serves every thread; requests are short, and serialising
them makes GitHub's numbering (one issue/PR number sequence per repository) trivially right.
Migrations are numbered, recorded in `schema_migrations`, and run on open.
"""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

MIGRATIONS: list[str] = [
    """
    CREATE TABLE users (
        id INTEGER PRIMARY KEY,
        login TEXT NOT NULL UNIQUE COLLATE NOCASE,
        type TEXT NOT NULL,
        created_at TEXT NOT NULL
    );
    CREATE TABLE repos (
        id INTEGER PRIMARY KEY,
        owner_id INTEGER NOT NULL REFERENCES users(id),
        name TEXT NOT NULL COLLATE NOCASE,
        description TEXT,
        homepage TEXT,
        private INTEGER NOT NULL DEFAULT 0,
        archived INTEGER NOT NULL DEFAULT 0,
        has_issues INTEGER NOT NULL DEFAULT 1,
        default_branch TEXT NOT NULL,
        created_at TEXT NOT NULL,
        updated_at TEXT NOT NULL,
        UNIQUE (owner_id, name)
    );
    CREATE TABLE labels (
        id INTEGER PRIMARY KEY,
        repo_id INTEGER NOT NULL REFERENCES repos(id),
        name TEXT NOT NULL COLLATE NOCASE,
        color TEXT NOT NULL,
        description TEXT,
        is_default INTEGER NOT NULL DEFAULT 0,
        UNIQUE (repo_id, name)
    );
    CREATE TABLE milestones (
        id INTEGER PRIMARY KEY,
        repo_id INTEGER NOT NULL REFERENCES repos(id),
        number INTEGER NOT NULL,
        title TEXT NOT NULL,
        description TEXT,
        state TEXT NOT NULL DEFAULT 'open',
        due_on TEXT,
        creator_id INTEGER NOT NULL REFERENCES users(id),
        created_at TEXT NOT NULL,
        updated_at TEXT NOT NULL,
        closed_at TEXT,
        UNIQUE (repo_id, number)
    );
    CREATE TABLE issues (
        id INTEGER PRIMARY KEY,
        repo_id INTEGER NOT NULL REFERENCES repos(id),
        number INTEGER NOT NULL,
        title TEXT NOT NULL,
        body TEXT,
        state TEXT NOT NULL DEFAULT 'open',
        state_reason TEXT,
        user_id INTEGER NOT NULL REFERENCES users(id),
        milestone_id INTEGER REFERENCES milestones(id),
        locked INTEGER NOT NULL DEFAULT 0,
        is_pull INTEGER NOT NULL DEFAULT 0,
        created_at TEXT NOT NULL,
        updated_at TEXT NOT NULL,
        closed_at TEXT,
        closed_by_id INTEGER REFERENCES users(id),
        UNIQUE (repo_id, number)
    );
    CREATE TABLE issue_labels (
        issue_id INTEGER NOT NULL REFERENCES issues(id),
        label_id INTEGER NOT NULL REFERENCES labels(id),
        PRIMARY KEY (issue_id, label_id)
    );
    CREATE TABLE comments (
        id INTEGER PRIMARY KEY,
        issue_id INTEGER NOT NULL REFERENCES issues(id),
        user_id INTEGER NOT NULL REFERENCES users(id),
        body TEXT NOT NULL,
        created_at TEXT NOT NULL,
        updated_at TEXT NOT NULL
    );
    CREATE TABLE pulls (
        id INTEGER PRIMARY KEY,
        issue_id INTEGER NOT NULL UNIQUE REFERENCES issues(id),
        head_ref TEXT NOT NULL,
        base_ref TEXT NOT NULL,
        head_sha TEXT NOT NULL,
        draft INTEGER NOT NULL DEFAULT 0,
        maintainer_can_modify INTEGER NOT NULL DEFAULT 0,
        merged_at TEXT,
        merge_commit_sha TEXT,
        merged_by_id INTEGER REFERENCES users(id)
    );
    CREATE INDEX issues_by_repo_state ON issues (repo_id, state);
    CREATE INDEX comments_by_issue ON comments (issue_id);
    """,
    # Commit statuses, check runs, pull request reviews and their line comments, branch
    # protection: what CI and reviewers say about a pull request.
    """
    CREATE TABLE statuses (
        id INTEGER PRIMARY KEY,
        repo_id INTEGER NOT NULL REFERENCES repos(id),
        sha TEXT NOT NULL,
        state TEXT NOT NULL,
        context TEXT NOT NULL,
        description TEXT,
        target_url TEXT,
        creator_id INTEGER NOT NULL REFERENCES users(id),
        created_at TEXT NOT NULL,
        updated_at TEXT NOT NULL
    );
    CREATE INDEX statuses_by_sha ON statuses (repo_id, sha);
    CREATE TABLE check_runs (
        id INTEGER PRIMARY KEY,
        repo_id INTEGER NOT NULL REFERENCES repos(id),
        head_sha TEXT NOT NULL,
        name TEXT NOT NULL,
        status TEXT NOT NULL,
        conclusion TEXT,
        external_id TEXT,
        details_url TEXT,
        started_at TEXT,
        completed_at TEXT,
        title TEXT,
        summary TEXT,
        text TEXT
    );
    CREATE INDEX check_runs_by_sha ON check_runs (repo_id, head_sha);
    CREATE TABLE reviews (
        id INTEGER PRIMARY KEY,
        pull_id INTEGER NOT NULL REFERENCES pulls(id),
        user_id INTEGER NOT NULL REFERENCES users(id),
        body TEXT NOT NULL,
        state TEXT NOT NULL,
        commit_id TEXT NOT NULL,
        submitted_at TEXT
    );
    CREATE TABLE review_comments (
        id INTEGER PRIMARY KEY,
        pull_id INTEGER NOT NULL REFERENCES pulls(id),
        review_id INTEGER REFERENCES reviews(id),
        user_id INTEGER NOT NULL REFERENCES users(id),
        path TEXT NOT NULL,
        line INTEGER,
        side TEXT NOT NULL DEFAULT 'RIGHT',
        body TEXT NOT NULL,
        commit_id TEXT NOT NULL,
        created_at TEXT NOT NULL,
        updated_at TEXT NOT NULL
    );
    CREATE TABLE protections (
        repo_id INTEGER NOT NULL REFERENCES repos(id),
        branch TEXT NOT NULL,
        rules TEXT NOT NULL,
        PRIMARY KEY (repo_id, branch)
    );
    """,
    # What happened to an issue or pull request besides what people wrote on it: labeled,
    # closed, merged, renamed and the rest, each with the fields its kind of event carries
    # (kept by value: a label deleted later is still named in the events it was in).
    """
    CREATE TABLE issue_events (
        id INTEGER PRIMARY KEY,
        issue_id INTEGER NOT NULL REFERENCES issues(id),
        actor_id INTEGER NOT NULL REFERENCES users(id),
        event TEXT NOT NULL,
        commit_id TEXT,
        label_name TEXT,
        label_color TEXT,
        rename_from TEXT,
        rename_to TEXT,
        milestone_title TEXT,
        lock_reason TEXT,
        state_reason TEXT,
        created_at TEXT NOT NULL
    );
    CREATE INDEX issue_events_by_issue ON issue_events (issue_id);
    """,
]


class ForgeDB:
    def __init__(self, path: Path) -> None:
        self._lock = threading.RLock()
        # check_same_thread=False is safe because every use holds self._lock.
        self._conn = sqlite3.connect(str(path), check_same_thread=False, isolation_level=None)
        self._conn.row_factory = sqlite3.Row
        self._conn.execute("PRAGMA foreign_keys = ON")
        self._conn.execute("PRAGMA journal_mode = WAL")
        # A test/offline forge trades durability on power loss for speed; WAL stays consistent.
        self._conn.execute("PRAGMA synchronous = NORMAL")
        self._migrate()

    def _migrate(self) -> None:
        with self.transaction():
            self._conn.execute(
                "CREATE TABLE IF NOT EXISTS schema_migrations (version INTEGER PRIMARY KEY)"
            )
            done = {row[0] for row in self._conn.execute("SELECT version FROM schema_migrations")}
            for version, script in enumerate(MIGRATIONS, start=1):
                if version in done:
                    continue
                for statement in script.split(";"):
                    if statement.strip():
                        self._conn.execute(statement)
                self._conn.execute("INSERT INTO schema_migrations VALUES (?)", (version,))

    @contextmanager
    def transaction(self) -> Iterator[None]:
        """Hold the lock and make everything inside one transaction."""
        with self._lock:
            if self._conn.in_transaction:
                yield
                return
            self._conn.execute("BEGIN IMMEDIATE")
            try:
                yield
            except BaseException:
                self._conn.execute("ROLLBACK")
                raise
            self._conn.execute("COMMIT")

    def one(self, sql: str, *params: Any) -> sqlite3.Row | None:
        with self._lock:
            row: sqlite3.Row | None = self._conn.execute(sql, params).fetchone()
            return row

    def all(self, sql: str, *params: Any) -> list[sqlite3.Row]:
        with self._lock:
            return list(self._conn.execute(sql, params).fetchall())

    def run(self, sql: str, *params: Any) -> int:
        """Execute a write; returns the new row id (for INSERT)."""
        with self._lock:
            cursor = self._conn.execute(sql, params)
            return cursor.lastrowid or 0

    def close(self) -> None:
        with self._lock:
            self._conn.close()
