"""The plan as data: the item model, the markdown parser and backlog.json.

A plan is read into `model.Plan` (items with ids, hashes, dependencies, checks); the parser
reports what it could not read instead of guessing. Imports nothing else of the harness.
"""
