"""Where agents run: session hosts (tmux, headless, remote) behind one protocol, and attaching.

Every host runs the agent behind a wrapper, so logs and exit codes outlive the host.
"""
