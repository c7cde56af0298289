"""Secrets: the tokens and keys the harness holds, and every door they must not leave by.

They are kept out of the harness's own process environment (which any process of the same user
can read), out of what code the harness did not write is given (agents, checks, executor steps),
and out of what it sends on (a diff is scanned before review and before push).
"""
