"""The agent: the model/tool loop, its system prompt, tools (built-in, deferred, MCP, skills), sub-agents and
the run set-up shared by the command line and the app.
"""
