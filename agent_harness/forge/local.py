"""The embedded forge as the offline tracker: started in-process, state under `.agent-harness/`.

`--forge local` and `demo` use it. The token is random per state directory and kept in a file
only the user can read, so a forge left running is not an open door even on loopback.
"""

from __future__ import annotations

import os
import secrets
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from agent_harness.errors import HarnessError


@dataclass(frozen=True)
class LocalForge:
    api_url: str
    token: str
    data_dir: Path


def _token(data_dir: Path) -> str:
    path = data_dir / "token"
    if path.is_file():
        return path.read_text(encoding="utf-8").strip()
    token = "local-" + secrets.token_hex(16)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as handle:
        handle.write(token + "\n")
    return token


@contextmanager
def local_forge(state_dir: Path) -> Iterator[LocalForge]:
    """Run the embedded forge on an ephemeral loopback port for the duration of the block."""
    from agent_harness.forge import Forge, ForgeError, ForgeServer

    data_dir = state_dir / "forge"
    try:
        data_dir.mkdir(parents=True, exist_ok=True)
        token = _token(data_dir)
        forge = Forge(data_dir, token=token)
    except (OSError, ForgeError) as exc:
        raise HarnessError(f"cannot start the local forge in {data_dir}: {exc}") from None
    try:
        with ForgeServer(forge, host="127.0.0.1", port=0) as server:
            yield LocalForge(server.api_url, token, data_dir)
    finally:
        forge.close()
