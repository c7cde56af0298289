"""The run: one item's attempt from worktree to pull request, resume after a crash, budgets,
checks, the agent's prompt, and building a run from what a person asked for.
"""
