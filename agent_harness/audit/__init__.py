"""The audit: an append-only record in its own database that outlives the work queue.

`database` (where it lives, migrations from `schema`), `ingest` (the only writer) fed by
`records` and `pricing`, the answers `cost`, `delivery`, `health`, `history` and `baselines`,
`maintenance` (rollups and thinning, bounded by `coverage`), `observe` (recording a run without
stopping it) and `adapters` (other tools' logs). Each answer is a function returning a pydantic
model, so the CLI and the HTTP API serve the same thing.
"""
