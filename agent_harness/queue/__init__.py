"""The work queue: items, leases with fencing tokens, and the fleet of workers that claims them.

A claim is a lease, not a lock: a dead worker's item comes back by itself when its lease runs out.
"""
