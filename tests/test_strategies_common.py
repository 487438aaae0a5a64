"""Shared builders for the strategy tests, and tests of what the planners share:
file patterns, turns, the exact sharing-out of a plan's savings, the config sections."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from workbench.engine.context.session import SessionContext
from workbench.engine.errors import ConfigError
from workbench.engine.plans.measure import allocate
from workbench.engine.plans.plan import Plan, PlanItem
from workbench.engine.plans.strategies.base import SessionIndex, first_words, matches_pattern
from workbench.engine.settings.config import Config, load_config
from workbench.engine.settings.strategies import StrategiesConfig
from workbench.engine.transcript.models import Message, Part, Session, TextPart, ToolResultPart, ToolUsePart, Usage
from workbench.engine.transcript.overlay import OverlayEvent
from workbench.engine.transcript.store import Store
from workbench.engine.transcript.tokens import TokenCounter

MODEL = "claude-sonnet-4-5-20250929"
COUNTER = TokenCounter()
"""Shared: counts are keyed by content, so sharing changes speed, never results."""


class Transcript:
    """A synthetic engine session, message by message: ``user``, ``call`` (tool use + result), ``say``."""

    def __init__(self, session_id: str = "s", *, usage: bool = False, context_window: int | None = None) -> None:
        self.session = Session(id=session_id, model=MODEL, context_window=context_window)
        self.messages: list[Message] = []
        self.usage = usage
        self._input = 1_000
        self._calls = 0

    def _add(self, role: str, parts: Sequence[Part], kind: str = "message", **fields: Any) -> str:
        message = Message(
            id=f"m{len(self.messages):04d}", session_id=self.session.id, index=len(self.messages),
            role=role, parts=list(parts), kind=kind, model=MODEL if role == "assistant" else None,
            **fields,
        )
        self.messages.append(message)
        return message.id

    def _usage(self) -> Usage | None:
        if not self.usage:
            return None
        self._input += 400
        return Usage(input_tokens=3, cache_read_input_tokens=self._input, output_tokens=50, model=MODEL)

    def user(self, text: str = "please go on") -> str:
        return self._add("user", [TextPart(text=text)])

    def say(self, text: str = "Done.") -> str:
        return self._add("assistant", [TextPart(text=text)], usage=self._usage())

    def call(self, name: str, tool_input: dict[str, Any], output: str, *, error: bool = False,
             text: str | None = None) -> tuple[str, str, str]:
        """An assistant tool call and its result: (assistant id, result message id, tool_use id)."""
        self._calls += 1
        tool_id = f"toolu_{self._calls:04d}"
        parts: list[Part] = [TextPart(text=text)] if text else []
        parts.append(ToolUsePart(id=tool_id, name=name, input=tool_input))
        assistant = self._add("assistant", parts, usage=self._usage())
        result = self._add("user", [ToolResultPart(tool_use_id=tool_id, text=output, is_error=error)], kind="tool_result")
        return assistant, result, tool_id

    def calls(self, specs: Sequence[tuple[str, dict[str, Any], str]]) -> tuple[str, str, list[str]]:
        """Parallel calls in one assistant message, their results in one message."""
        ids = []
        uses: list[Part] = []
        for name, tool_input, _ in specs:
            self._calls += 1
            ids.append(f"toolu_{self._calls:04d}")
            uses.append(ToolUsePart(id=ids[-1], name=name, input=tool_input))
        assistant = self._add("assistant", uses, usage=self._usage())
        results: list[Part] = [ToolResultPart(tool_use_id=i, text=out) for i, (_, _, out) in zip(ids, specs, strict=True)]
        return assistant, self._add("user", results, kind="tool_result"), ids

    def context(self, events: Sequence[OverlayEvent] = (), config: Config | None = None) -> SessionContext:
        return SessionContext(self.session, self.messages, events, COUNTER, config)

    def stored(self, store: Store, config: Config | None = None) -> SessionContext:
        store.save_session(self.session)
        store.save_messages(self.messages, COUNTER)
        return SessionContext.load(store, self.session.id, config)


def event(n: int, action: str, message_id: str, part_index: int | None = None, **data: Any) -> OverlayEvent:
    return OverlayEvent(id=f"e{n}", session_id="s", plan_id=f"p{n}", action=action,
                        message_id=message_id, part_index=part_index, data=data)


def strategies(**sections: dict[str, Any]) -> StrategiesConfig:
    return StrategiesConfig.model_validate(sections)


def big(label: str, words: int = 400) -> str:
    return f"{label}: " + " ".join(f"word{n % 97}" for n in range(words))


def prunes(plan: Plan) -> set[tuple[str, int | None]]:
    return {(i.message_id, i.part_index) for i in plan.items if i.action == "prune"}


# --- file patterns ----------------------------------------------------------------


@pytest.mark.parametrize(
    ("path", "pattern", "expected"),
    [
        ("docs/plan/01-vision.md", "docs/plan/**", True),
        ("/home/me/repo/docs/plan/phase/x.md", "docs/plan/**", True),
        ("docs/planning/x.md", "docs/plan/**", False),
        ("docs/phases/PROGRESS.md", "docs/phases/**/PROGRESS.md", True),
        ("docs/phases/phase_3/3-1/PROGRESS.md", "docs/phases/**/PROGRESS.md", True),
        ("docs/phases/phase_3/NOTES.md", "docs/phases/**/PROGRESS.md", False),
        ("AGENTS.md", "**/AGENTS.md", True),
        ("/abs/a/b/AGENTS.md", "**/AGENTS.md", True),
        ("src/NOT_AGENTS.md", "**/AGENTS.md", False),
        ("src/app.py", "*.py", True),
        ("./docs/plan/x.md", "docs/plan/**", True),
    ],
)
def test_protected_file_patterns(path: str, pattern: str, expected: bool) -> None:
    assert matches_pattern(path, pattern) is expected


# --- turns --------------------------------------------------------------------------


def test_turns_start_at_user_text_and_count_from_the_newest() -> None:
    t = Transcript()
    t.say("before any user message")
    first = t.user("one")
    _, result, _ = t.call("Bash", {"command": "ls"}, "a b")
    t.user("two")
    last = t.say("reply")
    index = SessionIndex.build(t.context())
    at = {m.id: n for n, m in enumerate(index.messages)}
    assert index.current_turn == 2
    assert [index.age(at[m]) for m in (first, result, last)] == [1, 1, 0]
    assert index.turns[at["m0000"]] == 0  # before the first user message


def test_the_index_finds_messages_whose_index_is_not_their_place_in_the_list() -> None:
    """A transcript whose message indexes are offset (a fork, a partial load) is indexed the same way."""
    t = Transcript()
    t.user("one")
    call, result, tool_id = t.call("Bash", {"command": "ls"}, "a b", error=True)
    t.user("two")
    plain = SessionIndex.build(t.context())
    t.messages = [m.model_copy(update={"index": m.index + 1}) for m in t.messages]
    shifted = SessionIndex.build(t.context())
    def facts(index: SessionIndex) -> list[tuple[str, int, bool]]:
        return [(m.id, index.turns[n], n in index.only_results) for n, m in enumerate(index.messages)]

    assert facts(shifted) == facts(plain) and len(plain.messages) == len(t.messages)
    assert [(r.message_id, r.tool_name) for r in shifted.failed] == [(result, "Bash")]
    caller = shifted.callers[0]
    assert shifted.messages[caller].id == call and shifted.calls[tool_id].position == caller


def test_the_index_marks_what_was_already_changed_and_pinned() -> None:
    t = Transcript()
    t.user("one")
    call, _, tool_id = t.call("Write", {"file_path": "a.py", "content": big("x")}, "ok")
    _, other, _ = t.call("Bash", {"command": "ls"}, "a b")
    index = SessionIndex.build(t.context([event(1, "prune", call, 0), event(2, "pin", other)]))
    assert index.calls[tool_id].changed and not index.result_of[tool_id].changed
    assert [m.id for m in index.messages if index.pinned(m.id)] == [other]
    assert index.calls_of(["Write"]) == [index.calls[tool_id]] and index.calls_of(["Bash"]) == [index.calls_at(1)[0]]
    assert index.calls_of(["Bash", "Write"]) == index.call_order  # in view order, whichever tool


def test_the_index_sizes_each_result_as_counting_it_would(store: Store) -> None:
    """A result alone in its message takes its size from the message's raw tokens; it must be its count,
    pruned or not, parallel or not, in a live session and in one resumed from the store."""
    t = Transcript()
    t.user("one")
    _, pruned, _ = t.call("Bash", {"command": "ls"}, big("out"))
    t.call("Read", {"file_path": "a.py"}, big("file"), text="reading")
    t.calls([("Bash", {"command": "pwd"}, "/repo"), ("Bash", {"command": "id"}, big("uid"))])
    t.say()
    for ctx in (t.context([event(1, "prune", pruned, 0)]), t.stored(store)):
        index = SessionIndex.build(ctx)
        assert len(index.results) == 4 and [len(index.calls_at(n)) for n in range(len(index.callers))] == [1, 1, 2]
        assert [index.tokens(r) for r in index.results] == [COUNTER.count_part(r.shown) for r in index.results]


# --- plans ----------------------------------------------------------------------------


def test_plans_round_trip_through_json() -> None:
    """Plan items are plain dataclasses (cheap to make by the thousand); a plan still validates and serialises."""
    plan = Plan(session_id="s", strategy="dedup", tokens_before=10, tokens_after=4,
                items=[PlanItem(message_id="m1", action="prune", part_index=0, reason="r", tokens_saved=6,
                                data={"replacement": "x"})])
    again = Plan.model_validate_json(plan.model_dump_json())
    assert again == plan and isinstance(again.items[0], PlanItem)
    assert plan.model_copy(deep=True).items[0] is not plan.items[0]


# --- sharing out the exact saving -----------------------------------------------------


@given(
    weights=st.lists(st.integers(min_value=-5_000, max_value=50_000), min_size=1, max_size=40),
    total=st.integers(min_value=-100_000, max_value=500_000),
)
def test_allocate_adds_up_exactly(weights: list[int], total: int) -> None:
    items = [PlanItem(message_id=f"m{n}", action="prune", tokens_saved=w) for n, w in enumerate(weights)]
    allocate(items, total)
    assert sum(i.tokens_saved for i in items) == total


def test_allocate_is_proportional() -> None:
    items = [PlanItem(message_id=f"m{n}", action="prune", tokens_saved=w) for n, w in enumerate((100, 300, 600))]
    allocate(items, 500)
    assert [i.tokens_saved for i in items] == [50, 150, 300]


# --- config -----------------------------------------------------------------------------


def test_defaults_are_the_specs_numbers() -> None:
    s = Config().strategies
    assert (s.dcp.turn_protection, s.dcp.nudge_at, s.dcp.nudge_every) == (6, 0.70, 15)
    assert s.dcp.protected_file_patterns == ["docs/plan/**", "docs/phases/**/PROGRESS.md", "**/AGENTS.md"]
    assert s.purge_errors.turns == 4
    assert (s.tool_output_pruning.protect, s.tool_output_pruning.minimum) == (40_000, 20_000)
    assert (s.tool_output_pruning.skip_turns, s.tool_output_pruning.protected_tools) == (2, ["skill"])
    assert s.offload.threshold == 4096
    assert (s.archive.cutoff, s.archive.max_chars, s.archive.summary) == (10, 800, "auto")
    assert [getattr(s, n).mode for n in ("dedup", "supersede_writes", "purge_errors", "tool_output_pruning",
                                         "archive")] == ["automatic"] * 5  # spec 003: archiving is automatic
    assert s.offload.mode == "manual"
    assert s.dcp.subagents is False


def test_toml_sections_are_read(tmp_path: Path) -> None:
    path = tmp_path / "config.toml"
    path.write_text(
        "[strategies.archive]\nmode = 'automatic'\ncutoff = 4\n"
        "[strategies.dcp]\nturn_protection = 2\nprotected_file_patterns = ['secret/**']\n"
        "[strategies.dedup]\nenabled = false\n",
        encoding="utf-8",
    )
    s = load_config(path).strategies
    assert (s.archive.mode, s.archive.cutoff) == ("automatic", 4)
    assert (s.dcp.turn_protection, s.dcp.protected_file_patterns) == (2, ["secret/**"])
    assert s.dedup.enabled is False


@pytest.mark.parametrize(
    ("toml", "key"),
    [
        ("[strategies.dedup]\nenabeld = true\n", "strategies.dedup.enabeld"),
        ("[strategies.archive]\nmode = 'sometimes'\n", "strategies.archive.mode"),
        ("[strategies.tool_output_pruning]\nprotect = -1\n", "strategies.tool_output_pruning.protect"),
        ("[strategies.dcp]\nnudge_at = 1.5\n", "strategies.dcp.nudge_at"),
        ("[strategies.offload]\nthreshold = 'big'\n", "strategies.offload.threshold"),
        ("[strategies.nonsense]\nenabled = true\n", "strategies.nonsense"),
    ],
)
def test_a_bad_key_is_named(tmp_path: Path, toml: str, key: str) -> None:
    path = tmp_path / "config.toml"
    path.write_text(toml, encoding="utf-8")
    with pytest.raises(ConfigError, match=key.replace(".", r"\.")):
        load_config(path)


@given(st.text(alphabet="ab \n\t\u00a0", max_size=600), st.integers(min_value=1, max_value=120))
def test_first_words_are_the_whole_texts_words_clipped(text: str, width: int) -> None:
    """A call is described from the start of its arguments only, and says the same as from all of them."""
    assert first_words(text, width) == " ".join(text.split())[:width]
