"""The harness database: engines, numbered migrations, the append-only event log and its seals.

One `Store` speaks to SQLite (default) or PostgreSQL (fleets across hosts); events are written
last in their transaction and sealed by a hash chain, so history is ordered and tamper-evident.
"""
