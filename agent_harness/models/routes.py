"""Which model, endpoint and key serve each role, and the errors of a route that is missing.

Callers name a role (planner, implementer, reviewer), never a model: the route map is data
(a `vendor:model` spec or a TOML file) that can be swapped whole while calls run, and a
route names only the variable its key lives in, never the key itself.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from agent_harness.errors import ConfigError, read_toml_file

ApiFormat = Literal["anthropic", "openai"]


@dataclass(frozen=True)
class Route:
    """Where a role's calls go. `classifier` names the vendor whose failure rules apply
    (default: `vendor`), e.g. `generic` for a self-hosted OpenAI-compatible server."""

    model: str
    endpoint: str
    vendor: str
    api_format: ApiFormat
    api_key_env: str
    classifier: str | None = None

    @property
    def parking_key(self) -> str:
        # A window is an account's budget at one endpoint: two keys at one URL are two budgets.
        return f"{self.endpoint.rstrip('/')}#{self.api_key_env}"


RoleMap = Mapping[str, Route]

# vendor -> (default endpoint, wire format, key variable, base-URL variable)
VENDOR_DEFAULTS: dict[str, tuple[str, ApiFormat, str, str]] = {
    "openai": ("https://api.openai.com/v1", "openai", "OPENAI_API_KEY", "OPENAI_BASE_URL"),
    "anthropic": (
        "https://api.anthropic.com",
        "anthropic",
        "ANTHROPIC_API_KEY",
        "ANTHROPIC_BASE_URL",
    ),
    "openrouter": (
        "https://openrouter.ai/api/v1",
        "openai",
        "OPENROUTER_API_KEY",
        "OPENROUTER_BASE_URL",
    ),
    "gemini": (
        "https://generativelanguage.googleapis.com/v1beta/openai",
        "openai",
        "GEMINI_API_KEY",
        "GEMINI_BASE_URL",
    ),
}


def route_from_spec(spec: str, env: Mapping[str, str]) -> Route:
    """A route from `vendor:model` (e.g. `openai:gpt-4.1`), with the vendor's usual endpoint,
    key variable and base-URL override variable (OPENAI_BASE_URL, ANTHROPIC_BASE_URL, ...)."""
    vendor, sep, model = spec.partition(":")
    vendor = vendor.strip().lower()
    if not sep or not model.strip():
        raise ConfigError(
            f"model route '{spec}' should look like vendor:model, e.g. openai:gpt-4.1"
        )
    if vendor not in VENDOR_DEFAULTS:
        known = ", ".join(sorted(VENDOR_DEFAULTS))
        raise ConfigError(f"unknown vendor '{vendor}' in '{spec}' (known: {known})")
    endpoint, api_format, key_env, base_env = VENDOR_DEFAULTS[vendor]
    return Route(
        model=model.strip(),
        endpoint=env.get(base_env) or endpoint,
        vendor=vendor,
        api_format=api_format,
        api_key_env=key_env,
    )


def load_routes_from_file(path: Path | str) -> dict[str, Route]:
    """Read `[roles.<role>]` tables (model, vendor, endpoint, api_key_env, api_format?,
    classifier?) from a TOML file."""
    source = Path(path)
    data = read_toml_file(source, ConfigError)
    roles = data.get("roles")
    if not isinstance(roles, dict) or not roles:
        raise ConfigError(f"routes file {source} has no [roles.<name>] tables")
    routes: dict[str, Route] = {}
    for role, table in roles.items():
        if not isinstance(table, dict):
            raise ConfigError(f"routes file {source}: roles.{role} must be a table")
        missing = [k for k in ("model", "vendor", "endpoint", "api_key_env") if k not in table]
        if missing:
            raise ConfigError(f"routes file {source}: roles.{role} lacks {', '.join(missing)}")
        routes[role] = route_from_table(table, {}, f"routes file {source}: roles.{role}")
    return routes


def route_from_table(table: Mapping[str, object], env: Mapping[str, str], where: str) -> Route:
    """A route from a `[roles]` entry: `vendor` and `model`, and optionally `endpoint`,
    `api_key_env`, `api_format` and `classifier` (the vendor's defaults otherwise)."""
    unknown = sorted(
        set(table) - {"model", "vendor", "endpoint", "api_key_env", "api_format", "classifier"}
    )
    if unknown:
        raise ConfigError(f"{where}: unknown key {unknown[0]!r}")
    if "model" not in table or "vendor" not in table:
        raise ConfigError(f"{where}: needs vendor and model")
    vendor = str(table["vendor"]).strip().lower()
    if vendor in VENDOR_DEFAULTS:
        default = route_from_spec(f"{vendor}:{table['model']}", env)
    elif "endpoint" not in table or "api_key_env" not in table:
        raise ConfigError(
            f"{where}: vendor {vendor!r} has no defaults: give endpoint and api_key_env"
        )
    else:
        default = None
    api_format = str(table.get("api_format", default.api_format if default else "openai"))
    if api_format not in ("anthropic", "openai"):
        raise ConfigError(f"{where}.api_format must be anthropic or openai")
    return Route(
        model=str(table["model"]),
        endpoint=str(table.get("endpoint") or (default.endpoint if default else "")),
        vendor=vendor,
        api_format="anthropic" if api_format == "anthropic" else "openai",
        api_key_env=str(table.get("api_key_env") or (default.api_key_env if default else "")),
        classifier=str(table["classifier"]) if "classifier" in table else None,
    )


def describe_route(route: Route) -> str:
    """`vendor:model at endpoint`: what events and the roles table show (never a key)."""
    return f"{route.vendor}:{route.model} at {route.endpoint}"


# ---------------------------------------------------------------------------------------------
# Errors


class UnknownRole(ConfigError):
    """No route serves this role."""

    def __init__(self, role: str, known: Sequence[str]) -> None:
        self.role = role
        self.known = tuple(known)
        listed = ", ".join(sorted(known)) or "none"
        super().__init__(f"no model route for role {role!r} (routes exist for: {listed})")


class MissingApiKey(ConfigError):
    """A route's API key variable is not set."""

    def __init__(self, role: str, variable: str) -> None:
        self.role = role
        self.variable = variable
        super().__init__(
            f"the model route for role {role!r} reads its API key from ${variable}, "
            "which is not set"
        )
