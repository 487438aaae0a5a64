"""The proxy's OpenAI side: the Responses and Chat Completions APIs (Codex CLI, Aider, OpenCode)."""
