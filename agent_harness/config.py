"""Settings: budgets, tracker, store, checks and paths, with where each value came from.

Layers, lowest first: defaults, a file (`agent-harness.toml`, or `[tool.agent-harness]` in
`pyproject.toml`), environment (`AGENT_HARNESS_SECTION__KEY`), flags. Every value remembers its
layer, so `agent-harness config` can say why a setting is what it is.
"""

from __future__ import annotations

import json
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, SecretStr, ValidationError

from agent_harness.errors import ConfigError
from agent_harness.secrets.process import process_env

ENV_PREFIX = "AGENT_HARNESS_"
CONFIG_FILE = "agent-harness.toml"
# Short names people already use; they map onto the dotted keys.
ENV_ALIASES = {"AGENT_HARNESS_DB": "store.db"}


class _Section(BaseModel):
    model_config = ConfigDict(
        extra="forbid", validate_assignment=True, use_attribute_docstrings=True
    )


class TrackerSettings(_Section):
    """Where the issues and pull requests live."""

    api_url: str | None = None
    """API base URL; None means api.github.com (or GITHUB_API_URL when set)."""
    token: SecretStr | None = None
    """Token for the tracker. Prefer GH_TOKEN / GITHUB_TOKEN; never handed to agents."""
    plan_key: str | None = None
    """Key that scopes a plan's issues in a repo; default: the plan file's stem."""
    write_spacing_s: float = Field(default=1.0, ge=0)
    """Seconds between writes, per GitHub's guidance on secondary rate limits."""
    max_rate_wait_s: float = Field(default=900.0, ge=0)
    """Longest wait for a primary rate-limit reset before stopping with a clear message."""
    request_timeout_s: float = Field(default=30.0, gt=0)
    """Timeout of one tracker request."""


class StoreSettings(_Section):
    """The database holding the queue and the event log."""

    db: str | None = None
    """Database URL: a SQLite path (default .agent-harness/harness.sqlite) or postgresql://..."""


class BudgetSettings(_Section):
    """Limits that make every loop finite."""

    max_attempts: int = Field(default=3, ge=1)
    """Attempts per item (agent run + checks + review) before it fails."""
    max_replans: int = Field(default=2, ge=0)
    """Whole-plan revisions the direct-API executor may make for one item."""
    agent_timeout_s: float = Field(default=3600.0, gt=0)
    """Wall time one agent session may take."""
    item_cost_usd: float | None = Field(default=None, ge=0)
    """Spend limit per item when cost is known; None means no limit."""
    run_cost_usd: float | None = Field(default=None, ge=0)
    """Spend limit per run when cost is known; None means no limit."""
    lease_s: float = Field(default=300.0, gt=0)
    """Lease length; a worker that stops heartbeating loses its item after this long."""


class CheckSettings(_Section):
    """Cheap gates that run before any reviewer is paid."""

    commands: list[str] = Field(default_factory=list)
    """Check commands run in the worktree, cheapest first."""
    timeout_s: float = Field(default=600.0, gt=0)
    """Timeout of one check command."""
    env_pass: list[str] = Field(default_factory=list)
    """Variables checks get even though they look secret (names or PREFIX* patterns), e.g. the
    DATABASE_URL your tests need. Everything else secret by name, by shape (a URL with a
    password, a vendor key) or by value is withheld from checks."""


class SessionSettings(_Section):
    """Where agents run."""

    host: Literal["auto", "tmux", "headless"] = "auto"
    """tmux sessions you can attach to, or plain background processes; auto picks tmux when it
    is installed."""


class SecretSettings(_Section):
    """What the harness refuses to let out."""

    shapes_ignored_in: list[str] = Field(default_factory=list)
    """Globs of files where key-shaped text is expected (test fixtures). The exact value of a
    secret the harness knows is refused in every file."""


class ReconcileSettings(_Section):
    """Pulling merged / closed / reverted back from the tracker."""

    requeue_reverted: bool = False
    """Put a reverted item back in the queue; when False it is flagged for a person instead."""
    revert_window_days: int = Field(default=30, ge=1)
    """How long after its merge a change is still watched for a revert on the default branch."""
    max_pr_rounds: int = Field(default=3, ge=0)
    """Rounds an open pull request may send its item back (failed CI, review, conflict)."""
    merge_when_green: bool = False
    """Merge an approved, green, conflict-free pull request of ours (off by default)."""


class ProjectSettings(_Section):
    """One project of a run of several (`[[projects]]`), used when `run` is given no --plan."""

    plan: str
    """The plan file; its name is the project's plan key."""
    repo: str | None = None
    """owner/name on the tracker; default: --repo."""
    work: str | None = None
    """The clone worktrees are made from; default: --work."""


class Settings(_Section):
    """Everything agent-harness can be configured with."""

    tracker: TrackerSettings = Field(default_factory=TrackerSettings)
    """The issue tracker."""
    store: StoreSettings = Field(default_factory=StoreSettings)
    """The database."""
    budgets: BudgetSettings = Field(default_factory=BudgetSettings)
    """Budgets."""
    checks: CheckSettings = Field(default_factory=CheckSettings)
    """Checks."""
    reconcile: ReconcileSettings = Field(default_factory=ReconcileSettings)
    """Reconcile."""
    sessions: SessionSettings = Field(default_factory=SessionSettings)
    """Sessions."""
    secrets: SecretSettings = Field(default_factory=SecretSettings)
    """Secrets."""
    projects: list[ProjectSettings] = Field(default_factory=list)
    """`[[projects]]`: the plans `run` works in one fleet when it is given no --plan."""
    roles: dict[str, str | dict[str, str]] = Field(default_factory=dict)
    """Model route per role (reviewer, planner, implementer): "vendor:model" or a table with
    vendor, model and optionally endpoint, api_key_env. A running run takes a change at once."""
    protected_paths: list[str] = Field(default_factory=lambda: [".github/**", CONFIG_FILE])
    """Globs an agent's change may never touch; such an item stops before review."""
    state_dir: str = ".agent-harness"
    """Directory (relative to the working directory) for local state: db, worktrees, forge."""


@dataclass
class LoadedSettings:
    """Settings plus, for every dotted key, the layer its value came from."""

    settings: Settings
    sources: dict[str, str] = field(default_factory=dict)
    file: Path | None = None

    def rows(self) -> list[tuple[str, str, str]]:
        """(key, shown value, source) for every leaf; secrets masked."""
        out: list[tuple[str, str, str]] = []
        for key, value in _leaves(self.settings):
            out.append((key, _show(value), self.sources.get(key, "default")))
        return out

    def as_json(self) -> dict[str, Any]:
        return {
            key: {"value": _jsonable(value), "source": self.sources.get(key, "default")}
            for key, value in _leaves(self.settings)
        }


def _leaves(model: BaseModel, prefix: str = "") -> list[tuple[str, Any]]:
    out: list[tuple[str, Any]] = []
    for name in type(model).model_fields:
        value = getattr(model, name)
        key = f"{prefix}{name}"
        if isinstance(value, BaseModel):
            out.extend(_leaves(value, key + "."))
        else:
            out.append((key, value))
    return out


def _show(value: Any) -> str:
    if isinstance(value, SecretStr):
        return "********" if value.get_secret_value() else ""
    if value is None:
        return "-"
    if isinstance(value, list):
        return ", ".join(str(v) for v in value) or "[]"
    return str(value)


def _jsonable(value: Any) -> Any:
    if isinstance(value, SecretStr):
        return "********" if value.get_secret_value() else None
    return value


def find_config_file(cwd: Path) -> tuple[Path, dict[str, Any]] | None:
    """The nearest agent-harness.toml, or pyproject.toml with [tool.agent-harness], upward."""
    for folder in (cwd, *cwd.parents):
        candidate = folder / CONFIG_FILE
        if candidate.is_file():
            return candidate, _read_toml(candidate)
        pyproject = folder / "pyproject.toml"
        if pyproject.is_file():
            data = _read_toml(pyproject)
            section = data.get("tool", {}).get("agent-harness")
            if isinstance(section, dict):
                return pyproject, section
        if (folder / ".git").exists():
            break
    return None


def _read_toml(path: Path) -> dict[str, Any]:
    try:
        with path.open("rb") as handle:
            return tomllib.load(handle)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{path}: not valid TOML ({exc})") from None
    except OSError as exc:
        raise ConfigError(f"cannot read {path}: {exc.strerror or exc}") from None


def _known_keys() -> dict[str, Any]:
    """Dotted leaf key -> its annotation's field info, for validation of env and flags."""
    keys: dict[str, Any] = {}
    for name, info in Settings.model_fields.items():
        default = info.get_default(call_default_factory=True)
        if isinstance(default, BaseModel):
            for sub, sub_info in type(default).model_fields.items():
                keys[f"{name}.{sub}"] = sub_info
        else:
            keys[name] = info
    return keys


def _flatten(data: Mapping[str, Any], origin: str, prefix: str = "") -> dict[str, Any]:
    known = _known_keys()
    sections = {key.split(".")[0] for key in known if "." in key}
    out: dict[str, Any] = {}
    for key, value in data.items():
        dotted = f"{prefix}{key}"
        if isinstance(value, dict) and dotted in sections:
            out.update(_flatten(value, origin, dotted + "."))
        elif dotted in known:
            out[dotted] = value
        else:
            raise ConfigError(f"{origin}: unknown key '{dotted}'")
    return out


def _from_env(env: Mapping[str, str]) -> dict[str, tuple[Any, str]]:
    known = _known_keys()
    out: dict[str, tuple[Any, str]] = {}
    for name, raw in env.items():
        if not name.startswith(ENV_PREFIX):
            continue
        dotted = ENV_ALIASES.get(name)
        if dotted is None:
            dotted = name[len(ENV_PREFIX) :].lower().replace("__", ".")
        if dotted not in known:
            continue  # other AGENT_HARNESS_* variables (tokens for tests, debug) are not settings
        value: Any = raw
        annotation = str(known[dotted].annotation)
        if "list" in annotation:
            stripped = raw.strip()
            value = (
                json.loads(stripped)
                if stripped.startswith("[")
                else [part.strip() for part in raw.split(",") if part.strip()]
            )
        out[dotted] = (value, f"env {name}")
    return out


def load_settings(
    cwd: Path | None = None,
    env: Mapping[str, str] | None = None,
    flags: Mapping[str, Any] | None = None,
    config_file: Path | None = None,
) -> LoadedSettings:
    """Build Settings from the four layers, refusing unknown keys and wrong types."""
    cwd = cwd or Path.cwd()
    env = process_env() if env is None else env
    layered: dict[str, Any] = {}
    sources: dict[str, str] = {}
    found: tuple[Path, dict[str, Any]] | None
    if config_file is not None:
        if not config_file.is_file():
            raise ConfigError(f"config file not found: {config_file}")
        data = _read_toml(config_file)
        if config_file.name == "pyproject.toml":
            data = data.get("tool", {}).get("agent-harness", {})
        found = (config_file, data)
    else:
        found = find_config_file(cwd)
    origin_of: dict[str, str] = {}
    if found is not None:
        path, data = found
        for key, value in _flatten(data, str(path)).items():
            layered[key] = value
            sources[key] = f"file {path.name}"
            origin_of[key] = str(path)
    for key, (value, origin) in _from_env(env).items():
        layered[key] = value
        sources[key] = origin
        origin_of[key] = origin
    for key, value in (flags or {}).items():
        if value is None:
            continue
        if key not in _known_keys():
            raise ConfigError(f"unknown setting '{key}'")
        layered[key] = value
        sources[key] = "flag"
        origin_of[key] = "command line"
    nested: dict[str, Any] = {}
    for key, value in layered.items():
        if "." in key:
            section, leaf = key.split(".", 1)
            nested.setdefault(section, {})[leaf] = value
        else:
            nested[key] = value
    try:
        settings = Settings.model_validate(nested)
    except ValidationError as exc:
        error = exc.errors()[0]
        dotted = ".".join(str(part) for part in error["loc"])
        where = origin_of.get(dotted, "configuration")
        raise ConfigError(f"{where}: {dotted}: {error['msg']}") from None
    return LoadedSettings(settings=settings, sources=sources, file=found[0] if found else None)


def database_url(settings: Settings, flag: str | None = None) -> str:
    """The database every command uses: --db / AGENT_HARNESS_DB, else [store] db, else the
    SQLite file in the state directory. One rule, so `work` reads what `run` wrote."""
    return flag or settings.store.db or str(Path(settings.state_dir) / "harness.sqlite")
