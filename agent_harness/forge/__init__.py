"""An embedded GitHub-compatible forge: a REST subset over SQLite plus bare git repos on disk.

It lets the harness (and its tests) run offline against something that behaves like
api.github.com, reached through PyGithub over real HTTP. It is written from GitHub's documented
behaviour and imports nothing from the harness's client side.
"""

from __future__ import annotations

from agent_harness.forge.core import Forge
from agent_harness.forge.errors import ApiError, ForgeAddressError, ForgeDataError, ForgeError
from agent_harness.forge.faults import Fault, FaultKind, Faults
from agent_harness.forge.server import ForgeServer

__all__ = [
    "ApiError",
    "Fault",
    "FaultKind",
    "Faults",
    "Forge",
    "ForgeAddressError",
    "ForgeDataError",
    "ForgeError",
    "ForgeServer",
]
