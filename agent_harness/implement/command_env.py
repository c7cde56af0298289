"""The environment a command the direct-API executor's model wrote runs in: no login of the
user's within reach (see `command_environment`)."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

# Where a login reaches git or ssh from the environment: an askpass helper (an editor's
# answers with the user's credentials), an ssh agent, a command git runs for ssh.
_LOGIN_DOORS = frozenset(
    {"GIT_ASKPASS", "SSH_ASKPASS", "SSH_AUTH_SOCK", "GIT_SSH", "GIT_SSH_COMMAND", "GH_TOKEN",
     "GITHUB_TOKEN", "GH_ENTERPRISE_TOKEN", "GH_CONFIG_DIR"}
)  # fmt: skip
# Git settings given in the environment (a credential helper among them: GIT_CONFIG_COUNT and
# its KEY_n/VALUE_n, GIT_CONFIG_GLOBAL, GIT_CONFIG_PARAMETERS), and an editor's askpass bridge.
_LOGIN_DOOR_PREFIXES = ("GIT_CONFIG", "VSCODE_GIT_")
# ssh reads keys from the account's home, whatever HOME says: offered none, it logs in nowhere.
_NO_SSH_LOGIN = "ssh -F /dev/null -o IdentitiesOnly=yes -o IdentityFile=/dev/null -o BatchMode=yes"
# Toolchains that find their installs through the home, and where (variable, folder in it).
_TOOLCHAIN_HOMES = (
    ("RUSTUP_HOME", ".rustup"),
    ("CARGO_HOME", ".cargo"),
    ("GOPATH", "go"),
    ("PYENV_ROOT", ".pyenv"),
    ("NVM_DIR", ".nvm"),
)


def command_environment(env: Mapping[str, str], home: Path) -> dict[str, str]:
    """What a check command the model wrote runs with: the checks' environment (secrets
    withheld), in a home of its own as a CLI agent has, so git and gh find no login of the
    user's to push with (gh's token, a credential helper, `~/.netrc`), and with the other
    doors to a login closed (an askpass helper, an ssh agent, ssh keys offered by ssh).
    Toolchains that find themselves through the home (rustup, cargo, go, pyenv, nvm) are
    pointed at the user's. Not a sandbox: a command that means to can still read the
    user's files."""
    real_home = Path(env.get("HOME") or Path.home())
    kept = {
        name: value
        for name, value in env.items()
        if name not in _LOGIN_DOORS and not name.startswith(_LOGIN_DOOR_PREFIXES)
    }
    for name, place in _TOOLCHAIN_HOMES:
        if name not in kept and (real_home / place).is_dir():
            kept[name] = str(real_home / place)
    home.mkdir(parents=True, exist_ok=True)
    return {
        **kept,
        "HOME": str(home),
        "XDG_CONFIG_HOME": str(home / ".config"),  # git's and gh's other config place
        "GIT_TERMINAL_PROMPT": "0",
        "GIT_CONFIG_NOSYSTEM": "1",
        "GIT_SSH_COMMAND": _NO_SSH_LOGIN,
    }
