"""The facts of a span: what a continuation is likely to need from the messages a compaction summarises.

Each fact has a kind, the text a user reads, the message it came from, and the terms a summary must show
to keep it (``fact_check`` does the checking). Deterministic and offline: tool calls (files, commands,
errors, the todo list) and the user's own words (names, numbers, instructions, [PERSIST] messages) and the
agent's decision sentences (the compaction's decision markers) are read with regular expressions, no model.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Literal, get_args

from workbench.engine.plans.compaction_metadata import (
    PATCH_TOOLS,
    READ_TOOLS,
    TODO_TOOLS,
    WRITE_TOOLS,
    DecisionMarkers,
    decisions_in,
)
from workbench.engine.settings.compaction import DEFAULT_DECISION_MARKERS
from workbench.engine.transcript.models import Message, ToolResultPart, ToolUsePart, posix_path
from workbench.engine.transcript.persist import has_persist_tag, strip_persist_tag

FactKind = Literal["file", "command", "error", "identifier", "decision", "todo", "instruction", "number", "persist"]
KINDS: tuple[FactKind, ...] = get_args(FactKind)
Match = Literal["path", "exact", "terms"]
"""How a summary shows a fact: one of its path's tails, one exact token, or enough of its key terms."""

SHELL_TOOLS = frozenset({"Bash", "bash", "shell"})
CLIP = 160

_STOP_WORDS = """
the and for with that this from into onto then than them they their there these those what when where which
while will would could should shall have has had having been being are was were not but all any each every
some such only also just very more most much many other about above after again against below between both
during before under until over out off own same too can cannot did does doing done don now here its it's
i'm you your yours our ours we us me my mine his her hers him she he who whom why how let lets let's
please make sure use using used yes okay ok thanks thank want need like get got one two
"""
_STOP = frozenset(_STOP_WORDS.split())
_WORD = re.compile(r"[A-Za-z][A-Za-z0-9_-]{2,}")
_TAGGED = re.compile(r"<([a-z][\w-]*)>(.*?)</\1>", re.DOTALL)
_BACKTICK = re.compile(r"`([^`\n]{2,60})`")
_NAME = re.compile(
    r"(?<![\w./-])(?:[A-Z][a-z0-9]+(?:[A-Z][a-z0-9]*)+|[a-z][a-z0-9]*(?:_[a-z0-9]+)+"
    r"|[A-Za-z][\w]*(?:[-.][A-Za-z0-9_]+)*[-.][A-Za-z0-9_]*\d[A-Za-z0-9_]*)(?![\w-])"
)
"""CamelCase, snake_case, and dotted or hyphenated names that hold a digit (``spotter-gqc.4``, ``gpt-4o``)."""
_NUMBER = re.compile(r"(?<![\w.])v?\d+(?:\.\d+)+(?![\w.])|(?<![\w.$,-])(?:\d{1,3}(?:,\d{3})+|\d{2,})(?:\s?(?:%|ms|k|KB|MB|GB|px))?"
                     r"(?![\w.])")
_CONSTRAINT = re.compile(
    r"\b(?:must|never|always|don'?t|do not|should|shouldn'?t|make sure|only|avoid|prefer|instead|need to|"
    r"keep|without|no longer|stop|remember)\b", re.IGNORECASE)
_SENTENCE = re.compile(r"(?<=[.!?])\s+|\n+")
_EXIT = re.compile(r"^Exit code (\d+)|\[exit code (-?\d+)\]\s*$", re.MULTILINE)
_ERROR_LINE = re.compile(r"error|fatal|fail|exception|traceback|not found|denied|does not exist|no such|invalid",
                         re.IGNORECASE)
_REJECTED = "The user doesn't want to proceed"
_HARNESS = ("<task-notification>",)
"""How a user message the agent's harness wrote starts (Claude Code's note that a background task ended)."""


@dataclass(frozen=True, slots=True)
class Fact:
    kind: FactKind
    text: str
    """What a user reads: ``edited src/app.py``, ``ran `pytest -q` (exit 1)``."""
    message_id: str
    terms: tuple[str, ...]
    """What a summary must show; ``need`` of them for ``terms`` facts, one for the others."""
    match: Match = "terms"
    need: int = 1
    status: str | None = None
    """A todo item's status, which a summary must also show beside it."""

    def as_json(self) -> dict[str, str]:
        return {"kind": self.kind, "text": self.text, "message_id": self.message_id}


def key_terms(text: str, limit: int = 8, skip: Iterable[str] = ()) -> tuple[str, ...]:
    """The first ``limit`` distinct content words of ``text``, lower-cased, without stop words."""
    skipped = _STOP.union(w.lower() for w in skip)
    out: dict[str, None] = {}
    for word in _WORD.findall(text):
        low = word.lower()
        if low not in skipped:
            out.setdefault(low, None)
            if len(out) == limit:
                break
    return tuple(out)


def half(terms: Sequence[str]) -> int:
    return max(1, math.ceil(len(terms) / 2))


def clip(text: str, limit: int = CLIP) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"


def path_tails(path: str) -> tuple[str, ...]:
    """``/a/b/c.py`` → ``a/b/c.py``, ``b/c.py``, ``c.py``: a summary naming any of them names the file."""
    parts = [p for p in posix_path(path).split("/") if p and p != "."]
    return tuple("/".join(parts[i:]) for i in range(len(parts)))


# --- tool calls ---------------------------------------------------------------------------------------------


def _command(call: ToolUsePart) -> str | None:
    value = call.input.get("command") if call.name in SHELL_TOOLS else None
    return value if isinstance(value, str) and value.strip() else None


def command_terms(command: str) -> tuple[str, ...]:
    """The program and its first words, of the first step that is not a ``cd``: ``cd x && mix test a.exs`` →
    ``mix``, ``test``, ``a.exs``."""
    steps = [s.strip() for s in re.split(r"&&|\|\||;|\||\n", command) if s.strip()]
    step = next((s for s in steps if not s.startswith("cd ")), steps[0] if steps else "")
    out: dict[str, None] = {}
    for token in step.split():
        token = token.strip("'\"()")
        if not token or token.startswith(("-", "$", ">", "<", "2>")) or "=" in token:
            continue
        word = token.rsplit("/", 1)[-1].lower().strip(".~*\\:")
        if len(word) >= 2:
            out.setdefault(word, None)
        if len(out) == 3:
            break
    return tuple(out)


def exit_status(result: ToolResultPart | None) -> int | None:
    """Claude Code's ``Exit code N`` first line, the engine's ``[exit code N]`` last one; else 1 for an error."""
    if result is None:
        return None
    text = result.text
    found = _EXIT.search(text[:40]) or _EXIT.search(text[-40:])
    if found:
        return int(found.group(1) or found.group(2))
    return 1 if result.is_error else 0


def error_line(text: str) -> str:
    """The line of a failed result that says what went wrong."""
    lines = [ln.strip() for ln in re.sub(r"</?tool_use_error>", "", text).splitlines() if ln.strip()]
    lines = [ln for ln in lines if not _EXIT.match(ln)]
    return clip(next((ln for ln in lines if _ERROR_LINE.search(ln)), lines[0] if lines else "failed"))


@dataclass(slots=True)
class _Call:
    call: ToolUsePart
    message_id: str
    result: ToolResultPart | None = None


def _calls(messages: Sequence[Message]) -> list[_Call]:
    calls: dict[str, _Call] = {}
    for message in messages:
        for part in message.parts:
            if isinstance(part, ToolUsePart):
                calls[part.id] = _Call(part, message.id)
            elif isinstance(part, ToolResultPart) and part.tool_use_id in calls:
                calls[part.tool_use_id].result = part
    return list(calls.values())


def _file_facts(calls: Sequence[_Call]) -> list[Fact]:
    verbs: dict[str, tuple[list[str], str]] = {}
    for c in calls:
        if c.result is not None and c.result.is_error:
            continue  # a failed edit changed nothing, a failed read showed nothing
        name = c.call.name
        verb = "read" if name in READ_TOOLS else "edited" if name in WRITE_TOOLS | PATCH_TOOLS else None
        if verb is None:
            continue
        paths = c.call.file_paths() or tuple(re.findall(r"^\*\*\* (?:Add|Update|Delete) File: (.+)$",
                                                        str(c.call.input.get("patchText") or ""), re.MULTILINE))
        for path in paths:
            seen = verbs.setdefault(path, ([], c.message_id))[0]
            if verb not in seen:
                seen.append(verb)
            verbs[path] = (seen, c.message_id)
    return [Fact("file", f"{' and '.join(v)} {path}", mid, path_tails(path), "path")
            for path, (v, mid) in verbs.items() if path_tails(path)]


def _step(call: ToolUsePart) -> tuple[str, tuple[str, ...]]:
    """What a retry of ``call`` has in common with it: the tool and the command's first words, or its files."""
    command = _command(call)
    return call.name, command_terms(command)[:2] if command is not None else call.file_paths()


def _tool_facts(calls: Sequence[_Call]) -> list[Fact]:
    """Commands (one per command, its latest run), errors (and whether a later retry succeeded), the last
    todo list."""
    commands: dict[tuple[str, ...], Fact] = {}
    errors: dict[str, Fact] = {}
    todos: list[Fact] = []
    steps = [_step(c.call) for c in calls]
    for at, c in enumerate(calls):
        command = _command(c.call)
        shown = clip(command, 100) if command is not None else ""
        if shown and (terms := command_terms(shown)):  # the terms of what a user reads, which adding it keeps
            code = exit_status(c.result)
            status = f" (exit {code})" if code is not None else ""
            commands.pop(terms, None)
            commands[terms] = Fact("command", f"ran `{shown}`{status}", c.message_id, terms,
                                   need=min(2, len(terms)))
        if c.call.name in TODO_TOOLS and isinstance(c.call.input.get("todos"), list):
            todos = _todo_facts(c.call.input["todos"], c.message_id)
        failed = c.result is not None and (c.result.is_error or (exit_status(c.result) or 0) != 0)
        if failed and c.result is not None and not c.result.text.startswith(_REJECTED):
            line = error_line(c.result.text)
            fixed = any(steps[later] == steps[at] and steps[at][1] and d.result is not None and not d.result.is_error
                        for later, d in enumerate(calls[at + 1:], start=at + 1))
            terms = key_terms(line, 6)
            if terms:
                errors[line] = Fact("error", f"{line} ({'fixed later' if fixed else 'not fixed'})", c.message_id,
                                    terms, need=min(2, len(terms)))
    return [*commands.values(), *errors.values(), *todos]


def _todo_facts(entries: list[Any], message_id: str) -> list[Fact]:
    out = []
    for entry in entries:
        if isinstance(entry, dict) and isinstance(entry.get("content"), str):
            status = str(entry.get("status") or "pending")
            content = clip(entry["content"], 100)
            terms = key_terms(content, 6)
            if terms:
                out.append(Fact("todo", f"{content} ({status})", message_id, terms,
                                need=half(terms), status=status))
    return out


# --- what the user and the agent said ---------------------------------------------------------------------


def typed_by_user(message: Message) -> bool:
    """A message the user wrote: not a tool result, a summary, or one the agent's harness injected (marked so,
    or a background task's notification)."""
    return (message.role == "user" and message.kind == "message" and not message.source.get("meta")
            and not message.source.get("reattached") and not message.text.lstrip().startswith(_HARNESS))


def user_text(message: Message) -> str:
    """The user's words, without the harness's tagged blocks (``<system-reminder>…``, ``<command-name>…``) but
    with what they typed after a slash command (``<command-args>``)."""
    return _TAGGED.sub(lambda m: f" {m.group(2)} " if m.group(1) == "command-args" else " ", message.text).strip()


def _user_facts(message: Message) -> list[Fact]:
    text = user_text(message)
    if not text or text.startswith("[Request interrupted"):
        return []
    mid = message.id
    if has_persist_tag(text):
        body = clip(strip_persist_tag(text))
        terms = key_terms(body, 10)
        return [Fact("persist", body, mid, terms, need=half(terms))] if terms else []
    out: list[Fact] = []
    names = dict.fromkeys([*(b.strip() for b in _BACKTICK.findall(text)), *_NAME.findall(text)])
    out += [Fact("identifier", name, mid, (name,), "exact") for name in names if len(name) >= 3]
    numbers = dict.fromkeys(n.strip() for n in _NUMBER.findall(_BACKTICK.sub(" ", text)))
    out += [Fact("number", n, mid, (n,), "exact") for n in numbers if n not in names]
    sentences = [s.strip() for s in _SENTENCE.split(text) if s.strip()]
    asks = [s for s in sentences if _CONSTRAINT.search(s)]
    if sentences and len(text) <= 300 and sentences[0] not in asks:
        asks.insert(0, sentences[0])  # a short message is the request itself
    for sentence in map(clip, asks):
        terms = key_terms(sentence, 8)
        if len(terms) >= 2:
            out.append(Fact("instruction", sentence, mid, terms, need=half(terms)))
    return out


def _decision_facts(message: Message, markers: DecisionMarkers) -> list[Fact]:
    out = []
    for sentence in map(clip, decisions_in(message.text, markers)):
        terms = key_terms(sentence, 8, skip=" ".join(markers.words).split())
        if len(terms) >= 2:
            out.append(Fact("decision", sentence, message.id, terms, need=half(terms)))
    return out


def extract(messages: Sequence[Message], decision_markers: Sequence[str] = DEFAULT_DECISION_MARKERS) -> list[Fact]:
    """The facts of ``messages`` (the span a compaction summarises), in order of kind, each kind in the order
    the span holds it; a fact stated twice is listed once, where it was last stated."""
    span = [m for m in messages if not m.sidechain and m.kind not in ("summary", "compact_boundary")]
    markers = DecisionMarkers(decision_markers)
    calls = _calls(span)
    found: list[Fact] = [*_file_facts(calls), *_tool_facts(calls)]
    for message in span:
        if typed_by_user(message):
            found += _user_facts(message)
        elif message.role == "assistant" and markers:
            found += _decision_facts(message, markers)
    latest: dict[tuple[str, str], Fact] = {}
    for fact in found:
        key = (fact.kind, fact.text if fact.kind != "todo" else fact.text.rsplit(" (", 1)[0])
        latest.pop(key, None)
        latest[key] = fact
    order = {kind: n for n, kind in enumerate(KINDS)}
    return sorted(latest.values(), key=lambda f: order[f.kind])
