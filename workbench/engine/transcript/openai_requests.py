"""OpenAI requests read as the Messages API requests the proxy records: one transcript model for every agent.

Codex CLI speaks the Responses API (``input`` items), Aider and OpenCode speak Chat Completions
(``messages`` with ``tool_calls``). The proxy forwards their bytes untouched; what it stores and attributes
is this reading of them: ``developer`` / ``system`` messages (and ``instructions``) as the system prompt,
tools (function, custom such as ``apply_patch``, each tool of a namespace, built-ins such as web search) as
tool definitions, reasoning items as thinking, function calls and their outputs as ``tool_use`` /
``tool_result`` blocks paired by ``call_id``. Consecutive items of one role make one message, as one answer's
items (reasoning, calls, text) are one assistant message; an answer read from the stream and the same items
echoed back by the client read alike, so the session's history is recognised in the next request.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Literal

import orjson

Api = Literal["responses", "chat"]
Block = dict[str, Any]
Origin = tuple[int, int]
"""Where a block of the reading comes from: (item or message index in the client's request, part index: the
content part of a message, the tool call of a Chat Completions message, -1 for the item itself)."""
Origins = list[list[Origin]]
"""One origin per block, per message of the reading."""
SYSTEM_ROLES = ("developer", "system")
TEXT_PARTS = frozenset({"input_text", "output_text", "text", "refusal", "summary_text", "reasoning_text"})
DROPPED = frozenset({"id", "status", "type"})
"""Item fields the model does not read as content (the client echoes ids it was given, or its own)."""
AGENT_REMINDERS = ("<environment_context>",)
"""What Codex CLI puts in user messages for the model rather than from the user: its environment."""
AGENT_MEMORY = ("# AGENTS.md instructions for ", "<user_instructions>")
"""Codex CLI's heading before the AGENTS.md files it sends in a user message (older versions: a tag)."""


def _text_blocks(content: Any) -> list[Block]:
    """A message's content (a string or parts) as text and image blocks."""
    if isinstance(content, str):
        return [{"type": "text", "text": content}] if content else []
    blocks: list[Block] = []
    for part in content if isinstance(content, list) else ():
        if not isinstance(part, Mapping):
            continue
        kind = part.get("type")
        text = part.get("text", part.get("refusal"))
        if kind in TEXT_PARTS and isinstance(text, str):
            blocks.append({"type": "text", "text": text})
        elif kind in ("input_image", "image_url"):
            blocks.append({"type": "image", "source": {"type": "url", "url": str(part.get("image_url", ""))}})
        else:
            blocks.append({key: value for key, value in part.items()})
    return blocks


def _arguments(raw: Any) -> dict[str, Any]:
    """A call's arguments (a JSON string) as the tool input; text that is not a JSON object stays text."""
    if isinstance(raw, Mapping):
        return dict(raw)
    try:
        parsed = orjson.loads(raw) if isinstance(raw, str) and raw else {}
    except orjson.JSONDecodeError:
        return {"arguments": raw}
    return parsed if isinstance(parsed, dict) else {"arguments": raw}


def _output(raw: Any) -> str | list[Block]:
    return raw if isinstance(raw, str) else _text_blocks(raw) if isinstance(raw, list) else orjson.dumps(raw).decode()


def _reasoning(item: Mapping[str, Any]) -> Block:
    """A reasoning item as thinking: its summary and content texts; the encrypted content as the signature."""
    texts = [str(part.get("text")) for key in ("summary", "content") for part in item.get(key) or ()
             if isinstance(part, Mapping) and isinstance(part.get("text"), str)]
    return {"type": "thinking", "thinking": "\n".join(texts), "signature": str(item.get("encrypted_content") or "")}


def _call_name(item: Mapping[str, Any]) -> str:
    namespace = item.get("namespace")
    name = str(item.get("name") or item.get("type") or "")
    return f"{namespace}__{name}" if isinstance(namespace, str) and namespace else name


def item_block(item: Mapping[str, Any]) -> tuple[str, Block | None]:
    """(role, block) of one Responses item that is not a message."""
    kind = str(item.get("type", ""))
    call_id = str(item.get("call_id") or item.get("id") or "")
    if kind == "reasoning":
        return "assistant", _reasoning(item)
    if kind == "function_call":
        return "assistant", {"type": "tool_use", "id": call_id, "name": _call_name(item),
                             "input": _arguments(item.get("arguments"))}
    if kind == "custom_tool_call":
        return "assistant", {"type": "tool_use", "id": call_id, "name": _call_name(item),
                             "input": {"input": item.get("input", "")}}
    if kind.endswith("_call_output"):
        return "user", {"type": "tool_result", "tool_use_id": call_id, "content": _output(item.get("output", ""))}
    if kind.endswith("_call"):
        rest = {key: value for key, value in item.items() if key not in DROPPED and key != "call_id"}
        return "assistant", {"type": "tool_use", "id": call_id, "name": kind, "input": rest}
    return "user", {key: value for key, value in item.items() if key not in ("id", "status")}


def _append(messages: list[dict[str, Any]], role: str, blocks: Sequence[Block], origins: Origins | None = None,
            where: Sequence[Origin] = ()) -> None:
    """Blocks of one role join the message before them when it has that role."""
    if not blocks:
        return
    if messages and messages[-1]["role"] == role:
        messages[-1]["content"].extend(blocks)
        if origins is not None:
            origins[-1].extend(where)
    else:
        messages.append({"role": role, "content": list(blocks)})
        if origins is not None:
            origins.append(list(where))


def read_items(items: Iterable[Any], system: list[Block], origins: Origins | None = None) -> list[dict[str, Any]]:
    """Responses ``input`` (or ``output``) items as messages; leading developer/system messages go to ``system``."""
    messages: list[dict[str, Any]] = []
    for at, item in enumerate(items):
        if not isinstance(item, Mapping):
            continue
        role = item.get("role")
        if isinstance(role, str) and item.get("type", "message") == "message":
            content = item.get("content")
            blocks = _text_blocks(content)
            if role in SYSTEM_ROLES and not messages:
                system.extend(blocks)
            else:
                where = [(at, -1)] if isinstance(content, str) else [(at, n) for n in range(len(blocks))]
                _append(messages, "system" if role in SYSTEM_ROLES else role, blocks, origins, where)
            continue
        role, block = item_block(item)
        if block is not None:
            _append(messages, role, [block], origins, [(at, -1)])
    return messages


THINKING_PART = -2
"""The origin part of a Chat Completions message's reasoning; its tool calls are parts 1000 and on."""
CALL_PARTS = 1000


def _chat_message(message: Mapping[str, Any]) -> tuple[str, list[Block], list[int]]:
    """(role, blocks, each block's part: see :data:`Origin`)."""
    role = str(message.get("role", "user"))
    if role == "tool":
        return "user", [{"type": "tool_result", "tool_use_id": str(message.get("tool_call_id", "")),
                         "content": _output(message.get("content", ""))}], [-1]
    content = message.get("content")
    blocks = _text_blocks(content)
    parts = [-1] if isinstance(content, str) and blocks else list(range(len(blocks)))
    reasoning = message.get("reasoning_content") or message.get("reasoning")
    if isinstance(reasoning, str) and reasoning:
        blocks.insert(0, {"type": "thinking", "thinking": reasoning, "signature": ""})
        parts.insert(0, THINKING_PART)
    for n, call in enumerate(message.get("tool_calls") or ()):
        function = call.get("function") if isinstance(call, Mapping) else None
        if isinstance(function, Mapping):
            blocks.append({"type": "tool_use", "id": str(call.get("id", "")), "name": str(function.get("name", "")),
                           "input": _arguments(function.get("arguments"))})
            parts.append(CALL_PARTS + n)
    return ("system" if role in SYSTEM_ROLES else role), blocks, parts


def read_chat(raw: Iterable[Any], system: list[Block], origins: Origins | None = None) -> list[dict[str, Any]]:
    """Chat Completions ``messages`` as messages; leading system/developer messages go to ``system``."""
    messages: list[dict[str, Any]] = []
    for at, message in enumerate(raw):
        if not isinstance(message, Mapping):
            continue
        role, blocks, parts = _chat_message(message)
        if role == "system" and not messages:
            system.extend(blocks)
        else:
            _append(messages, role, blocks, origins, [(at, part) for part in parts])
    return messages


def chat_answer_blocks(message: Mapping[str, Any]) -> list[Block]:
    """The blocks of a Chat Completions answer (``choices[0].message``), as its echo will read."""
    return _chat_message(message)[1]


def tool_definitions(tools: Any) -> list[Block]:
    """Each tool as a definition (name, description, the rest): a namespace's tools one by one, a
    built-in tool named by its type."""
    out: list[Block] = []
    for tool in tools if isinstance(tools, list) else ():
        if not isinstance(tool, Mapping):
            continue
        function = tool.get("function")
        if isinstance(function, Mapping):  # Chat Completions
            tool = {"type": "function", **function}
        kind = tool.get("type")
        if kind == "namespace" and isinstance(tool.get("tools"), list):
            for inner in tool_definitions(tool["tools"]):
                out.append({**inner, "name": f"{tool.get('name')}__{inner['name']}"})
            continue
        definition: Block = {"name": str(tool.get("name") or kind or "tool"),
                             "description": str(tool.get("description") or "")}
        if kind in ("function", None):
            definition["input_schema"] = tool.get("parameters") or {"type": "object"}
        else:
            definition.update({key: value for key, value in tool.items() if key not in ("name", "description")})
        out.append(definition)
    return out


def session_key(api: Api, body: Mapping[str, Any], headers: Mapping[str, str]) -> str | None:
    """The agent's own session id: Codex's ``session-id`` / ``thread-id`` headers or its ``prompt_cache_key``,
    OpenCode's ``x-session-id``; None for a client that sends none (Aider): history extension then."""
    for name in ("session-id", "thread-id", "x-session-id", "x-session-affinity"):
        if headers.get(name):
            return headers[name]
    key = body.get("prompt_cache_key") if api == "responses" else None
    return key if isinstance(key, str) and key else None


def as_messages_request(api: Api, body: Mapping[str, Any], headers: Mapping[str, str],
                        origins: Origins | None = None) -> dict[str, Any] | None:
    """The request as a Messages API body (system, tools, messages, the session in ``metadata.user_id``), or
    None when it is not a request of that API; ``origins`` gets where each block of it comes from."""
    system: list[Block] = []
    if api == "responses":
        instructions = body.get("instructions")
        if isinstance(instructions, str) and instructions:
            system.append({"type": "text", "text": instructions})
        items = body.get("input")
        if isinstance(items, str):
            items = [{"role": "user", "content": items}]
        if not isinstance(items, list):
            return None
        messages = read_items(items, system, origins)
        limit = body.get("max_output_tokens")
    else:
        if not isinstance(body.get("messages"), list):
            return None
        messages = read_chat(body["messages"], system, origins)
        limit = body.get("max_completion_tokens", body.get("max_tokens"))
    out: dict[str, Any] = {"model": body.get("model"), "max_tokens": limit, "api": api}
    session = session_key(api, body, headers)
    if session is not None:
        out["metadata"] = {"user_id": orjson.dumps({"session_id": session}).decode()}
    if system:
        out["system"] = system
    if body.get("tools"):
        out["tools"] = tool_definitions(body.get("tools"))
    out["messages"] = messages
    return out
