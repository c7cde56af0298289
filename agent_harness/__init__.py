"""agent-harness: a markdown plan in, reviewed pull requests out, and an honest record between.

The package is a library first; `agent_harness.cli` is a thin adapter over it.
"""

from __future__ import annotations

__version__ = "0.1.0"
