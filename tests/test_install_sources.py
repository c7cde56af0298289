"""Every install command the project shows installs this project, never a name it does not own.

"agent-harness" on the Python package index is an unrelated project; a recipe that installs it
would hand that project the token its job holds.
"""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

import pytest

pytestmark = pytest.mark.unit

ROOT = Path(__file__).resolve().parents[1]
PIP_INSTALL = re.compile(r"pip3?\s+install\s+(?P<args>[^\n`|;&]*)")


def _owned_and_depended_names() -> set[str]:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    names = {project["name"]}
    specs = [*project["dependencies"], *project["optional-dependencies"]["dev"]]
    for spec in specs:
        names.add(re.split(r"[\[<>=!~ ;]", spec, maxsplit=1)[0].lower())
    return names


def install_targets(text: str) -> list[str]:
    """What each `pip install` in `text` asks for (options and editable paths left out)."""
    targets: list[str] = []
    for match in PIP_INSTALL.finditer(text):
        words = match.group("args").replace('"', " ").replace("'", " ").split()
        skip_next = False
        for word in words:
            if skip_next:
                skip_next = False
                continue
            if word in ("-e", "--editable", "-r", "--requirement", "-c", "--constraint"):
                skip_next = True  # a path follows
                continue
            if word == "@":
                skip_next = True  # `name @ url`: the url is where the named package comes from
                continue
            if word.startswith("-") or word.startswith(".") or word.startswith("$"):
                continue
            targets.append(word)
    return targets


def documents() -> list[Path]:
    found = [ROOT / "README.md", ROOT / "AGENTS.md", *sorted((ROOT / "docs").glob("*.md"))]
    found += sorted(
        p for p in (ROOT / "examples").rglob("*") if p.suffix in {".yml", ".yaml", ".md", ".sh"}
    )
    return found


def test_every_install_command_names_a_package_this_project_owns_or_depends_on() -> None:
    allowed = _owned_and_depended_names()
    wrong = []
    for path in documents():
        for target in install_targets(path.read_text(encoding="utf-8")):
            name = re.split(r"[\[<>=!~@ ]", target, maxsplit=1)[0].lower()
            if target.startswith("git+"):
                continue  # the repository at a pinned ref: a source the user chose
            if name not in allowed:
                wrong.append(f"{path.relative_to(ROOT)}: pip install {target}")
    assert wrong == []


def test_the_reading_catches_the_name_that_is_not_ours() -> None:
    assert install_targets("run: python -m pip install agent-harness") == ["agent-harness"]
    assert "agent-harness" not in _owned_and_depended_names()
    assert install_targets("pip install -q -e '.[dev]' && pytest") == []
