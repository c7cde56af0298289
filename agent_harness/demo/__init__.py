"""The offline demo: the example plan worked end to end on the embedded forge, with the
example agent and a scripted reviewer. It is a user of the library, not part of the testing kit.
"""
