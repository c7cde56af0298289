"""Run every benchmark in this folder, one after another, and print their figures.

.venv/bin/python benchmarks/run.py            # all of them
.venv/bin/python benchmarks/run.py plan sync  # only bench_plan.py and bench_sync.py
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent


def main(argv: list[str]) -> int:
    wanted = set(argv)
    status = 0
    for script in sorted(HERE.glob("bench_*.py")):
        name = script.stem.removeprefix("bench_")
        if wanted and name not in wanted:
            continue
        print(f"== {script.name}", flush=True)
        status |= subprocess.call([sys.executable, str(script)])
        print(flush=True)
    return status


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
