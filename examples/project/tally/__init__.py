"""tally: small text statistics (the example project that agent-harness's demo works on)."""
