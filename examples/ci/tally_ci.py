#!/usr/bin/env python3
"""The example project's CI, run by the local forge on each pull request head (`--ci`).

It runs the tests, then one rule the harness's own checks do not: a README with a Usage
section must show an example run ("For example"). The example agent's first Usage section
has none, so that pull request fails CI once and goes back to the agent, which adds one.
Standard library only. Usage: tally_ci.py (in a checkout of the head).
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path


def main() -> int:
    tests = subprocess.run([sys.executable, "-m", "unittest", "-q"], check=False)
    if tests.returncode != 0:
        print("tally CI: the tests failed")
        return 1
    readme = Path("README.md").read_text(encoding="utf-8") if Path("README.md").exists() else ""
    if "## Usage" in readme and "For example" not in readme.split("## Usage", 1)[1]:
        print("tally CI: README.md's Usage section shows no example run ('For example ...')")
        return 1
    print("tally CI: passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
