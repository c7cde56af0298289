"""Settings: budgets, tracker, store, checks and paths, with where each value came from.

Layers, lowest first: defaults, a file (`agent-harness.toml`, or `[tool.agent-harness]` in
`pyproject.toml`), environment (`AGENT_HARNESS_SECTION__KEY`), flags. Every value remembers its
layer, so `agent-harness config` can say why a setting is what it is.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    SecretStr,
    ValidationError,
    ValidationInfo,
    field_validator,
)

from agent_harness.errors import ConfigError, read_json, read_toml_file
from agent_harness.plan.model import PLAN_KEY_PATTERN
from agent_harness.secrets.process import process_env
from agent_harness.secrets.shapes import TRACKER_TOKEN_ENV, mask_url

ENV_PREFIX = "AGENT_HARNESS_"
CONFIG_FILE = "agent-harness.toml"
# Short names people already use; they map onto the dotted keys.
ENV_ALIASES = {"AGENT_HARNESS_DB": "store.db"}
# AGENT_HARNESS_* variables that are not settings: read by other parts (debugging, the sealed
# credentials, the demo, the test kit). Any other AGENT_HARNESS_* variable that looks like a
# setting (a SECTION__KEY, or a near miss of a setting's name) is refused as a misspelling.
ENV_OTHERS = frozenset(
    {
        "AGENT_HARNESS_DEBUG",
        "AGENT_HARNESS_AUDIT_DB",
        "AGENT_HARNESS_SEALED_FD",
        "AGENT_HARNESS_DEMO_REVIEWER_KEY",
        "AGENT_HARNESS_DEMO_PLANNER_KEY",
        "AGENT_HARNESS_SESSION_TOKEN",
        "AGENT_HARNESS_SERVICE_TOKEN",
        "AGENT_HARNESS_TOKEN",
        "AGENT_HARNESS_NPM_AGENTS",
        "AGENT_HARNESS_NPM_CACHE",
        "AGENT_HARNESS_TEST_PG",
    }
)
DEFAULT_PROTECTED = (".github/**", CONFIG_FILE)


class _Section(BaseModel):
    model_config = ConfigDict(
        extra="forbid",
        validate_assignment=True,
        use_attribute_docstrings=True,
        allow_inf_nan=False,  # "no cap" is said by leaving a cap unset
    )

    @field_validator("*", mode="before")
    @classmethod
    def _no_bool_for_a_number(cls, value: Any, info: ValidationInfo) -> Any:
        """`max_attempts = true` is a slip, not 1: a number is written as one (a string from
        the environment is still read as the number it spells)."""
        field = cls.model_fields.get(info.field_name or "")
        wants_number = field is not None and field.annotation in (int, float, int | None,
                                                                   float | None)  # fmt: skip
        if isinstance(value, bool) and wants_number:
            raise ValueError("a number is wanted, not true or false")
        return value


# The longest wait any setting may ask for: a year. Longer is a typo (or `1e308`), and would
# overflow the clocks and sockets it is handed to.
_MAX_SECONDS = 366 * 24 * 3600.0


class TrackerSettings(_Section):
    """Where the issues and pull requests live."""

    api_url: str | None = None
    """API base URL; None means api.github.com (or GITHUB_API_URL when set)."""
    token: SecretStr | None = None
    """Token for the tracker. Prefer GH_TOKEN / GITHUB_TOKEN; never handed to agents."""
    plan_key: str | None = Field(default=None, pattern=PLAN_KEY_PATTERN)
    """Key that scopes a plan's issues in a repo; default: the plan file's stem."""
    write_spacing_s: float = Field(default=1.0, ge=0, le=_MAX_SECONDS)
    """Seconds between writes, per GitHub's guidance on secondary rate limits."""
    max_rate_wait_s: float = Field(default=900.0, ge=0, le=_MAX_SECONDS)
    """Longest wait for a primary rate-limit reset before stopping with a clear message."""
    request_timeout_s: float = Field(default=30.0, gt=0, le=_MAX_SECONDS)
    """Timeout of one tracker request."""


class StoreSettings(_Section):
    """The database holding the queue and the event log."""

    db: str | None = None
    """Database URL: a SQLite path (default .agent-harness/harness.sqlite) or postgresql://..."""


class BudgetSettings(_Section):
    """Limits that make every loop finite."""

    max_attempts: int = Field(default=3, ge=1, le=100)  # as run's --max-attempts
    """Attempts per item (agent run + checks + review) before it fails."""
    max_replans: int = Field(default=2, ge=0, le=100)
    """Whole-plan revisions the direct-API executor may make for one item."""
    agent_timeout_s: float = Field(default=3600.0, gt=0, le=_MAX_SECONDS)
    """Wall time one agent session may take."""
    agent_idle_s: float = Field(default=120.0, gt=0, le=_MAX_SECONDS)
    """Seconds an agent may print nothing before it is looked at: stopped at a usage limit
    (its item is parked), or waiting for input (said so; it keeps its session, for a person to
    attach and answer, until agent_timeout_s)."""
    item_cost_usd: float | None = Field(default=None, ge=0)
    """Spend limit per item when cost is known; None means no limit."""
    run_cost_usd: float | None = Field(default=None, ge=0)
    """Spend limit per run when cost is known; None means no limit."""
    max_call_usd: float | None = Field(default=None, ge=0)
    """What one agent run or model call may cost at most: the bound a budget is checked with
    before each call (the largest call seen so far counts too); None means only what was seen."""
    inception_cost_usd: float | None = Field(default=None, ge=0)
    """What one inception session's planner calls may cost, over all its steps: no call is
    made whose worst case could pass it; None means no limit."""
    lease_s: float = Field(default=300.0, gt=0, allow_inf_nan=False, le=_MAX_SECONDS)
    """Lease length; a worker that stops heartbeating loses its item after this long (finite:
    the claim's event records when it ends)."""


class CheckSettings(_Section):
    """Cheap gates that run before any reviewer is paid."""

    commands: list[str] = Field(default_factory=list)
    """Check commands run in the worktree, cheapest first."""
    timeout_s: float = Field(default=600.0, gt=0, le=_MAX_SECONDS)
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
    revert_window_days: int = Field(default=30, ge=1, le=3650)  # ten years
    """How long after its merge a change is still watched for a revert on the default branch."""
    max_pr_rounds: int = Field(default=3, ge=0, le=100)
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
    protected_paths: list[str] = Field(default_factory=lambda: list(DEFAULT_PROTECTED))
    """Globs an agent's change may never touch; such an item stops before review. A file's
    list adds to these defaults; `[protected_paths]` with `paths = [...]` and `replace = true`
    replaces them."""
    state_dir: str = ".agent-harness"
    """Directory (relative to the working directory) for local state: db, worktrees, forge."""


@dataclass
class LoadedSettings:
    """Settings plus, for every dotted key, the layer its value came from."""

    settings: Settings
    sources: dict[str, str] = field(default_factory=dict)
    file: Path | None = None
    warnings: list[str] = field(default_factory=list)
    """What is allowed but unwise (a token written in a file); never holds a secret's value."""

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
    if isinstance(value, dict):
        return ", ".join(f"{k} = {v}" for k, v in value.items()) or "{}"
    return mask_url(str(value))


def _jsonable(value: Any) -> Any:
    if isinstance(value, SecretStr):
        return "********" if value.get_secret_value() else None
    if isinstance(value, str):  # a database URL may carry its password
        return mask_url(value)
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
    return read_toml_file(path, ConfigError)


# Keys that say how another key's value is taken, not settings of their own.
_PROTECTED_REPLACE = "protected_paths.replace"


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


def nearest_key(name: str) -> str | None:
    """The valid dotted key (or section) closest to a misspelt `name`, if any is close: by the
    whole name first, then by its last part (`budgets.protected_paths` -> `protected_paths`)."""
    known = [*_known_keys(), _PROTECTED_REPLACE]
    sections = {key.split(".")[0] for key in known if "." in key}
    # A section is no answer for a key already inside it (`budgets.nope` is not `budgets`).
    candidates = known + sorted(s for s in sections if not name.startswith(s + "."))
    found = difflib.get_close_matches(name, candidates, n=1, cutoff=0.75)
    if found:
        return found[0]
    by_leaf = {key.rsplit(".", 1)[-1]: key for key in known}
    leaf = difflib.get_close_matches(name.rsplit(".", 1)[-1], list(by_leaf), n=1, cutoff=0.75)
    return by_leaf[leaf[0]] if leaf else None


def _unknown(origin: str, dotted: str) -> ConfigError:
    near = nearest_key(dotted)
    hint = f"; did you mean '{near}'?" if near and near != dotted else ""
    return ConfigError(f"{origin}: unknown key '{dotted}'{hint}")


def _flatten(data: Mapping[str, Any], origin: str, prefix: str = "") -> dict[str, Any]:
    known = _known_keys()
    sections = {key.split(".")[0] for key in known if "." in key}
    out: dict[str, Any] = {}
    for key, value in data.items():
        dotted = f"{prefix}{key}"
        if isinstance(value, dict) and dotted == "protected_paths":
            # [protected_paths] paths = [...], replace = true|false
            for sub, given in value.items():
                if sub not in ("paths", "replace"):
                    raise _unknown(origin, f"protected_paths.{sub}")
                out["protected_paths" if sub == "paths" else _PROTECTED_REPLACE] = given
        elif isinstance(value, dict) and dotted in sections:
            out.update(_flatten(value, origin, dotted + "."))
        elif dotted in known:
            out[dotted] = value
        elif dotted in sections:  # `budgets = 5`: a section given a value
            raise ConfigError(
                f"{origin}: '{dotted}' is a section, not a value: write [{dotted}] and its keys "
                f"under it (`agent-harness config` lists them)"
            )
        else:
            raise _unknown(origin, dotted)
    return out


def _env_key(name: str) -> str:
    return ENV_ALIASES.get(name) or name[len(ENV_PREFIX) :].lower().replace("__", ".")


def env_name(dotted: str) -> str:
    """The environment variable that sets a dotted key (`budgets.lease_s` ->
    AGENT_HARNESS_BUDGETS__LEASE_S)."""
    return ENV_PREFIX + dotted.upper().replace(".", "__")


def _from_env(env: Mapping[str, str]) -> dict[str, tuple[Any, str]]:
    known = _known_keys()
    out: dict[str, tuple[Any, str]] = {}
    for name, raw in env.items():
        if not name.startswith(ENV_PREFIX) or name in ENV_OTHERS:
            continue
        dotted = _env_key(name)
        if dotted == _PROTECTED_REPLACE:
            out[dotted] = (raw, f"env {name}")
            continue
        if dotted not in known:
            near = nearest_key(dotted)
            if "." in dotted or (near and near != dotted):
                hint = f"; did you mean {env_name(near)}?" if near else ""
                raise ConfigError(f"env {name}: no such setting{hint}")
            continue  # not shaped like a setting, nor near one: some other tool's variable
        out[dotted] = (_env_value(name, raw, str(known[dotted].annotation)), f"env {name}")
    return out


def _env_value(name: str, raw: str, annotation: str) -> Any:
    stripped = raw.strip()
    if "list" in annotation:
        if stripped.startswith("["):
            return _env_json(name, stripped)
        return [part.strip() for part in raw.split(",") if part.strip()]
    if "dict" in annotation and stripped.startswith("{"):
        return _env_json(name, stripped)
    return raw


def _env_json(name: str, text: str) -> Any:
    try:
        return read_json(text)
    except RecursionError:
        raise ConfigError(f"env {name}: its JSON is nested too deeply") from None
    except ValueError as exc:
        raise ConfigError(f"env {name}: not valid JSON ({exc})") from None


def _read_file_layer(cwd: Path, config_file: Path | None) -> tuple[Path, dict[str, Any]] | None:
    if config_file is None:
        return find_config_file(cwd)
    data = _read_toml(config_file)
    if config_file.name == "pyproject.toml":
        data = data.get("tool", {}).get("agent-harness", {})
    return config_file, data


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
    origin_of: dict[str, str] = {}
    found = _read_file_layer(cwd, config_file)
    layers: list[tuple[dict[str, Any], Callable[[str], str], str]] = []
    if found is not None:
        path, data = found
        from_file = _flatten(data, str(path))
        layers.append((from_file, lambda _key: f"file {path.name}", str(path)))
    from_env = _from_env(env)
    layers.append(({k: v for k, (v, _o) in from_env.items()}, lambda k: from_env[k][1], ""))
    given = {key: value for key, value in (flags or {}).items() if value is not None}
    for key in given:
        if key not in _known_keys():
            raise ConfigError(f"unknown setting '{key}'")
    layers.append((given, lambda _key: "flag", "command line"))
    for values, source, origin in layers:
        for key, value in values.items():
            layered[key] = value
            sources[key] = source(key)
            origin_of[key] = origin or source(key)
    _add_to_default_protection(layered, sources, origin_of)
    settings = _validated(layered, origin_of)
    above = None if "state_dir" in sources else state_dir_above(cwd, settings.state_dir)
    if above is not None:  # run from a folder of the clone: the clone's state, not a new one
        settings.state_dir = str(above)
        sources["state_dir"] = f"found in {above.parent}"
    if settings.tracker.token is None:  # it said "default", as if a run would have none
        named = next((name for name in TRACKER_TOKEN_ENV if env.get(name)), None)
        sources["tracker.token"] = f"a run takes env {named}" if named else "a run asks gh"
    loaded = LoadedSettings(settings=settings, sources=sources, file=found[0] if found else None)
    if settings.tracker.token is not None and sources.get("tracker.token", "").startswith("file"):
        loaded.warnings.append(
            f"tracker.token is written in {found[0] if found else 'a file'}: anyone who can "
            "read that file or its history has the token; set GH_TOKEN (or use `gh auth "
            "login`) and remove it from the file"
        )
    return loaded


def state_dir_above(cwd: Path, name: str) -> Path | None:
    """The state directory of the git work tree `cwd` is inside, when `cwd` is a folder below
    the tree's top and has none of its own: `agent-harness work` run from `app/src` reads
    `app/.agent-harness`, as git finds `app/.git`, instead of making a second state (and a
    second local forge, with its issues made again). Never above the work tree's top."""
    if Path(name).is_absolute() or (cwd / name).exists() or (cwd / ".git").exists():
        return None
    for parent in cwd.resolve().parents:
        if (parent / name).is_dir():
            return parent / name if _in_a_work_tree(parent) else None
        if (parent / ".git").exists():
            return None
    return None


def _in_a_work_tree(folder: Path) -> bool:
    return any((where / ".git").exists() for where in (folder, *folder.parents))


def _add_to_default_protection(
    layered: dict[str, Any], sources: dict[str, str], origin_of: dict[str, str]
) -> None:
    """A configured `protected_paths` adds to the defaults, unless `replace = true` says it
    stands alone: a list written to protect one more folder must not unprotect CI."""
    replace = layered.pop(_PROTECTED_REPLACE, False)
    where = origin_of.pop(_PROTECTED_REPLACE, "configuration")
    sources.pop(_PROTECTED_REPLACE, None)
    if isinstance(replace, str) and replace.strip().lower() in ("true", "false", "1", "0"):
        replace = replace.strip().lower() in ("true", "1")
    if not isinstance(replace, bool):
        raise ConfigError(f"{where}: {_PROTECTED_REPLACE}: must be true or false")
    given = layered.get("protected_paths")
    if given is None:
        if replace:
            raise ConfigError(f"{where}: {_PROTECTED_REPLACE} is true but no paths are given")
        return
    if replace or not isinstance(given, list):
        return  # a value that is not a list is the validation's to refuse
    layered["protected_paths"] = list(dict.fromkeys([*DEFAULT_PROTECTED, *given]))
    sources["protected_paths"] = f"default + {sources['protected_paths']}"


def _validated(layered: dict[str, Any], origin_of: dict[str, str]) -> Settings:
    nested: dict[str, Any] = {}
    for key, value in layered.items():
        if "." in key:
            section, leaf = key.split(".", 1)
            nested.setdefault(section, {})[leaf] = value
        else:
            nested[key] = value
    try:
        return Settings.model_validate(nested)
    except ValidationError as exc:
        error = exc.errors()[0]
        # A union's member names (`roles.implementer.str`) are pydantic's, not the file's.
        dotted = ".".join(str(p) for p in error["loc"] if not _TYPE_TAG.match(str(p)))
        where = origin_of.get(dotted) or origin_of.get(dotted.split(".")[0], "configuration")
        raise ConfigError(f"{where}: {dotted}: {error['msg']}") from None


# What pydantic adds to an error's place for a union's member (`str`, `list[str]`, a model's
# class name): no key of the file.
_TYPE_TAG = re.compile(r"^(?:str|int|float|bool|bytes|none|[a-z-]*\[.*\]|function-.*|[A-Z]\w*)$")


def database_url(settings: Settings, flag: str | None = None) -> str:
    """The database every command uses: --db / AGENT_HARNESS_DB, else [store] db, else the
    SQLite file in the state directory. One rule, so `work` reads what `run` wrote."""
    return flag or settings.store.db or str(Path(settings.state_dir) / "harness.sqlite")
