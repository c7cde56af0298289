"""The demo runs from an installed package, not only from a clone: its examples ship inside it.

`pip install agent-harness-fleet` and then `agent-harness demo` (the command the top-level help
advertises) once said "examples/ not found beside the package". The examples now live where the
package data is (`agent_harness/data/examples`, a link to `examples/` in a clone), and the
package-data globs of pyproject.toml take every file of them, dotfiles included.
"""

from __future__ import annotations

import glob
import tomllib
from pathlib import Path

import pytest

from agent_harness.demo.run import examples_dir

pytestmark = pytest.mark.unit

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "agent_harness"


def test_the_demo_reads_its_examples_from_inside_the_package() -> None:
    found = examples_dir()
    assert (PACKAGE / "data" / "examples").resolve() == found.resolve()
    assert found.resolve() == (ROOT / "examples").resolve()  # one copy, seen from both places
    assert (found / "PLAN.md").is_file() and (found / "agent" / "tally_agent.py").is_file()


def test_the_package_data_globs_take_every_example_file() -> None:
    # The globs as setuptools applies them: relative to the package, following the link.
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())
    globs = config["tool"]["setuptools"]["package-data"]["agent_harness"]
    shipped = {
        (PACKAGE / name).resolve()
        for pattern in globs
        for name in glob.glob(pattern, root_dir=PACKAGE, recursive=True)
        if (PACKAGE / name).is_file()
    }
    examples = {p.resolve() for p in (ROOT / "examples").rglob("*") if p.is_file()}
    assert examples and examples <= shipped, sorted(str(p) for p in examples - shipped)
