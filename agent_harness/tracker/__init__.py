"""The tracker side: the Tracker protocol, the GitHub client, plan-to-issue sync and reconcile.

Issues are found again by a hidden marker, never by title; what the tracker says (merged,
closed, reverted) flows back into the queue. Nothing here imports the embedded forge.
"""
