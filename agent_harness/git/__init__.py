"""Git: the user's clone, item worktrees and branches, protected paths, and cleanup.

Harness code never pushes to or commits on a default branch; the guard here refuses it.
"""
