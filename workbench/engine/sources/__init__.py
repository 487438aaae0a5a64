"""Sources of sessions beyond the agent's own: discovery of other agents' transcripts, following one as it is
written, export, fork, and steering applied to proxied requests.
"""
