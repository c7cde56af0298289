"""Environments handed to code the harness did not write: checks, executor steps, agents.

A variable is withheld when its name says it is secret (tokens, keys, passwords, every
AGENT_HARNESS_* setting), when its value has a credential's shape (a URL with a password, a
vendor key format), or when its value equals a secret the harness knows under another name.
A person can let named variables through (`checks.env_pass`); an agent never can.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from fnmatch import fnmatchcase

from agent_harness.secrets.shapes import is_secret_name, known_values, value_looks_secret


@dataclass(frozen=True)
class FilteredEnv:
    """The environment to hand on, and the names withheld from it (never their values)."""

    env: dict[str, str]
    withheld: tuple[str, ...] = field(default=())


def is_secret(name: str) -> bool:
    """By name alone; `filter_env` also looks at values."""
    return is_secret_name(name)


def filter_env(
    env: Mapping[str, str], *, allow: Iterable[str] = (), known: Iterable[str] = ()
) -> FilteredEnv:
    """`env` minus everything secret by name, by shape or by value.

    `allow` lists names (or `PREFIX*` patterns) a person chose to pass even so, e.g. the
    DATABASE_URL their tests need. `known` adds secret values held outside `env` (a token from
    a config file or `gh auth token`), so a copy of one under a harmless name is withheld too.
    """
    allowed = tuple(allow)
    secrets = known_values(env, known)
    kept: dict[str, str] = {}
    withheld: list[str] = []
    for name, value in env.items():
        if any(fnmatchcase(name, pattern) for pattern in allowed):
            kept[name] = value
        elif _GIT_PAIR.match(name):
            kept[name] = value  # judged with its group, below: a config key is no secret
        elif is_secret_name(name) or value_looks_secret(value) or value.strip() in secrets:
            withheld.append(name)
        else:
            kept[name] = value
    # Git's settings in the environment are a group (GIT_CONFIG_COUNT and its KEY_n, VALUE_n):
    # one withheld (a VALUE holding a token) leaves a count naming a missing key, and then every
    # git command fails. A group with a secret in it is withheld whole.
    group = [name for name in kept if name == "GIT_CONFIG_COUNT" or _GIT_PAIR.match(name)]
    values = [kept[name] for name in group if name.startswith("GIT_CONFIG_VALUE_")]
    keys = [kept[name].lower() for name in group if name.startswith("GIT_CONFIG_KEY_")]
    said = any(key.startswith("credential") or key.endswith("extraheader") for key in keys)
    if said or any(value_looks_secret(v) or v.strip() in secrets for v in values):
        for name in group:
            withheld.append(name)
            del kept[name]
    return FilteredEnv(kept, tuple(sorted(withheld)))


_GIT_PAIR = re.compile(r"^GIT_CONFIG_(?:KEY|VALUE)_\d+$")


def without_secrets(
    env: Mapping[str, str], *, allow: Iterable[str] = (), known: Iterable[str] = ()
) -> dict[str, str]:
    """The environment minus anything secret; see `filter_env`."""
    return filter_env(env, allow=allow, known=known).env
