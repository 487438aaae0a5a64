"""The local Messages API proxy: agents people already run (Claude Code, any program on the Anthropic
API) send their requests through it; each request is stored by its new content, placed in a session,
and the user's steering of that session is applied to the requests that follow."""
