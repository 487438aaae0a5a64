"""The scripted provider: replays a recorded session offline, tools and all.

A script is a JSON file::

    {
      "name": "demo",
      "model": "scripted-demo",          # model name shown and used for limits
      "context_window": 16000,           # optional: overrides the model's window
      "max_output": 4096,                # optional
      "workspace": "demo_workspace",     # optional: a folder beside the script, copied
                                         #   to a fresh temp dir for every run
      "system": "You are ...",           # optional base instructions
      "turns": [
        {"user": "[PERSIST] Fix the failing test ...",
         "responses": [                  # one entry per model call in this turn
           [{"thinking": "..."}, {"text": "..."},
            {"tool": "read_file", "input": {"path": "src/app.py"}}],
           [{"text": "Fixed."}]
         ]}
      ]
    }

A ``{"narrate": "..."}`` block says what the response's step is, for a person watching the script play
(the app's played demo shows it); the model's answer does not hold it.

Tool calls in a response run for real through the engine's tools; the next
response is replayed after their results are in context. Usage is computed
from the engine's own estimate of each request and marked ``synthetic``.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field, ValidationError

from workbench.engine.errors import WorkbenchError
from workbench.engine.providers.base import ModelRequest, ModelResponse, StreamDelta, StreamItem
from workbench.engine.providers.prompt_cache import PromptCache, cached_usage
from workbench.engine.transcript.models import Part, TextPart, ThinkingPart, ToolUsePart
from workbench.engine.transcript.tokens import TokenCounter

END_OF_SCRIPT = "(The script has no more responses.)"


class ScriptTurn(BaseModel):
    user: str
    responses: list[list[dict[str, Any]]] = Field(default_factory=list)


class Script(BaseModel):
    name: str
    model: str = "scripted-demo"
    context_window: int | None = None
    max_output: int | None = None
    workspace: str | None = None
    system: str | None = None
    turns: list[ScriptTurn]

    @classmethod
    def load(cls, path: Path) -> Script:
        try:
            return cls.model_validate_json(path.read_text(encoding="utf-8"))
        except (OSError, ValidationError, ValueError) as exc:
            raise WorkbenchError(f"cannot load script {path}: {exc}") from exc


class ScriptedProvider:
    name = "scripted"

    def __init__(
        self, script: Script, counter: TokenCounter | None = None, chunk_delay: float = 0.0, *, skip: int = 0
    ) -> None:
        """``skip``: responses an earlier run of this script already gave (a session it is resumed on)."""
        self.script = script
        self.counter = counter or TokenCounter()
        self.chunk_delay = chunk_delay
        self._queue: list[list[dict[str, Any]]] = [r for turn in script.turns for r in turn.responses][skip:]
        self._calls = 0
        self.requests: list[ModelRequest] = []
        self.cache = PromptCache(self.counter)
        """Reads and writes reported as the API would, at the marks the request carries."""

    @property
    def remaining(self) -> int:
        return len(self._queue)

    async def count_tokens(self, request: ModelRequest) -> int | None:
        return request.estimated_input_tokens

    async def stream(self, request: ModelRequest) -> AsyncIterator[StreamItem]:
        self.requests.append(request)
        blocks = self._queue.pop(0) if self._queue else [{"text": END_OF_SCRIPT}]
        self._calls += 1
        parts: list[Part] = []
        for number, block in enumerate(blocks):
            if "text" in block or "thinking" in block:
                kind = "text" if "text" in block else "thinking"
                text = str(block[kind])
                for chunk in _chunks(text):
                    if self.chunk_delay:
                        await asyncio.sleep(self.chunk_delay)
                    yield StreamDelta(kind, chunk)
                parts.append(TextPart(text=text) if kind == "text" else ThinkingPart(text=text))
            elif "tool" in block:
                tool_id = f"toolu_s{self._calls:03d}_{number}"
                parts.append(ToolUsePart(id=tool_id, name=str(block["tool"]), input=dict(block.get("input") or {})))
        output = sum(self.counter.count_part(p) for p in parts)
        stop = "tool_use" if any(isinstance(p, ToolUsePart) for p in parts) else "end_turn"
        total = request.estimated_input_tokens or self._fallback_count(request)
        usage = cached_usage(self.cache.bill(request.body()), total, output, request.model)
        yield ModelResponse(parts=parts, usage=usage, stop_reason=stop, model=request.model)

    def _fallback_count(self, request: ModelRequest) -> int:
        return self.counter.count_text(json.dumps(request.body(), ensure_ascii=False))


def _chunks(text: str, size: int = 24) -> list[str]:
    return [text[i : i + size] for i in range(0, len(text), size)] or [""]
