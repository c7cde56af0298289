"""Review: the structured verdict, and the reviewers that give it (a model, or a CLI agent).

The reviewer is of another vendor than the implementer and never sees the agent's own story.
"""
