"""Implementers: the protocol the pipeline calls, the CLI-agent implementer, and the direct-API
executor with its step plans and the patching ladder that lands a model's edits.
"""
