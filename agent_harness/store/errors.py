"""What the database layer raises: it could not be used, it is newer than this code, or its
event history is no longer protected."""

from __future__ import annotations

from collections.abc import Sequence

from agent_harness.errors import HarnessError


class StoreError(HarnessError):
    """The database could not be used."""

    def __init__(self, where: str, detail: str) -> None:
        self.where = where
        self.detail = detail
        super().__init__(f"database {where}: {detail}")


class SchemaTooNew(StoreError):
    """The database was written by a newer agent-harness."""

    def __init__(self, where: str, found: int, known: int) -> None:
        self.found = found
        self.known = known
        super().__init__(
            where,
            f"schema version {found} is newer than this agent-harness knows ({known}); "
            "upgrade agent-harness, it will not downgrade the database",
        )


class EventsUnprotected(StoreError):
    """The database no longer refuses changes to its event history (a trigger is missing,
    disabled or altered), so that history cannot be trusted as it stands."""

    exit_code = 2

    def __init__(self, where: str, missing: Sequence[str], repair: str) -> None:
        self.missing = tuple(missing)
        self.repair = repair
        super().__init__(
            where,
            f"the event log is not protected: {', '.join(self.missing)}; its history may have "
            f"been changed. Check it and restore the protection with: {repair}",
        )
