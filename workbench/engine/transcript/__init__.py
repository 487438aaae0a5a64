"""The transcript: messages, overlay events, the SQLite store and its migrations, the importers that read
other agents' files, token counting, redaction and the proxied requests' blocks.

What was said and recorded, never what the model is shown (that is :mod:`workbench.engine.context.session`).
"""
