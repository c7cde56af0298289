"""Inception: a paragraph argued into an approved scope, then a PLAN.md the harness can run.

`session` is the state machine (every step an event, resumable from the log), `planner` asks
the model client's `planner` role and checks its answers, `render` writes and re-reads the
plan, `answers` applies a file of answers (or the planner's defaults) for unattended runs.
Everything returns pydantic models, so the CLI and the HTTP API are thin adapters.
"""
