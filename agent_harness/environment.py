"""Environments handed to code the harness did not write: checks, executor steps, agents.

Anything that looks like a secret (tokens, keys, passwords, every AGENT_HARNESS_* variable)
is left out, because the code being run (tests an agent wrote, a command a model planned) must
never be able to read the tracker token or another vendor's key.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

SECRET_NAME = re.compile(
    r"(TOKEN|SECRET|PASSWORD|PASSWD|API_KEY|APIKEY|PRIVATE_KEY|CREDENTIAL)", re.IGNORECASE
)
ALWAYS_SECRET = frozenset({"GH_TOKEN", "GITHUB_TOKEN", "GH_ENTERPRISE_TOKEN"})


def is_secret(name: str) -> bool:
    return (
        name in ALWAYS_SECRET or name.startswith("AGENT_HARNESS_") or bool(SECRET_NAME.search(name))
    )


def without_secrets(env: Mapping[str, str]) -> dict[str, str]:
    """The environment minus anything that looks secret."""
    return {name: value for name, value in env.items() if not is_secret(name)}
