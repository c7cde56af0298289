"""`python -m agent_harness` runs the CLI."""

from __future__ import annotations

import sys

from agent_harness.cli import main

sys.exit(main())
