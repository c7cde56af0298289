"""`agent-harness` and `python -m agent_harness`: seal the credentials away, then run the CLI.

Sealing comes before anything else is imported, so the restart it may cost is cheap and no
module has read the environment yet (see `agent_harness.secrets.process`).
"""

from __future__ import annotations

import sys
from typing import NoReturn


def main() -> NoReturn:
    from agent_harness.secrets.process import SecretsError, seal_process

    try:
        seal_process()
    except SecretsError as exc:
        sys.stderr.write(f"error: {exc.message}\n")
        sys.exit(exc.exit_code)
    from agent_harness.cli import main as run_cli

    sys.exit(run_cli())


if __name__ == "__main__":
    main()
