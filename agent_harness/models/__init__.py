"""Model endpoints: role routes, the client with per-worker retry and endpoint parking, the
vendors' wire formats, and the failure classes each provider's answers are sorted into.
"""
