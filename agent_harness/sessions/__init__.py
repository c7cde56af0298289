"""Where agents run: session hosts (tmux, headless, remote) behind one protocol, and attaching.

Every host runs the agent behind the same wrapper, so logs and exit codes outlive the host.
"""
