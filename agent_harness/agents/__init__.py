"""CLI agents: presets (how each tool is started), the runner that watches one in a session,
its environment and home, and reading what it printed about its own run.
"""
