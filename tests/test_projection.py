"""Projection: incremental == full, requests and their estimates, overlay effects, and properties."""

from __future__ import annotations

import json
import shutil
import statistics
from collections.abc import Sequence
from pathlib import Path

import pytest
from helpers import (
    CLAUDE_FIXTURES,
    COMPACT_BOUNDARY_LINE,
    COMPACT_PRE_TOKENS,
    assistant_ids,
    claude_fixture,
    last_usage_by_id,
    usage_input_total,
)
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from workbench.engine.context.effective import one_line
from workbench.engine.context.projection import PRUNED_PLACEHOLDER, ContextView, project
from workbench.engine.context.session import SessionContext
from workbench.engine.transcript.importers import import_file, parse_file
from workbench.engine.transcript.models import (
    Message,
    Part,
    Session,
    TextPart,
    ThinkingPart,
    ToolResultPart,
    ToolUsePart,
    Usage,
)
from workbench.engine.transcript.overlay import OverlayEvent, fold
from workbench.engine.transcript.store import Store
from workbench.engine.transcript.tokens import TokenCounter

FIXTURE_KEYS = list(CLAUDE_FIXTURES)

_COUNTER = TokenCounter()
"""Shared across tests: counts are keyed by content, so sharing changes speed, never results."""

Loaded = tuple[Session, list[Message], list[OverlayEvent]]


@pytest.fixture(scope="module")
def loaded(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Loaded]:
    """Each fixture imported into a real store and loaded back, as the app would."""
    out: dict[str, Loaded] = {}
    db = tmp_path_factory.mktemp("projection") / "wb.db"
    with Store(db) as store:
        for key in FIXTURE_KEYS:
            session_id = import_file(store, claude_fixture(key)).session.id
            out[key] = (store.get_session(session_id), store.load_messages(session_id), store.load_overlay(session_id))
            _COUNTER.cache.update(store.token_cache(session_id))
    return out


def _fresh_view(session: Session, messages: Sequence[Message], events: Sequence[OverlayEvent]) -> ContextView:
    return project(session.id, messages, fold(events), TokenCounter(dict(_COUNTER.cache)), model=session.model)


def _splits(key: str, messages: Sequence[Message]) -> list[int]:
    n = len(messages)
    points = {0, 1, n // 3, n // 2, n - 1, n}
    if key == "258c7280":
        boundary = next(i for i, m in enumerate(messages) if m.kind == "compact_boundary")
        points |= {boundary - 1, boundary, boundary + 1}
    return sorted(p for p in points if 0 <= p <= n)


@pytest.mark.parametrize("key", FIXTURE_KEYS)
def test_incremental_append_equals_full_build(key: str, loaded: dict[str, Loaded]) -> None:
    session, messages, events = loaded[key]
    full = SessionContext(session, messages, events, _COUNTER)
    full_view, full_budget = full.view(), full.budget()
    assert full_view == _fresh_view(session, messages, events)

    for k in _splits(key, messages):
        ctx = SessionContext(session, messages[:k], events, _COUNTER)
        early_view, early_budget = ctx.view(), ctx.budget()
        for i, message in enumerate(messages[k:]):
            ctx.append(message)
            if i % 7 == 0:  # read in between, as the app does on every event
                ctx.budget()
                ctx.view()
        assert ctx.view() == full_view, f"split at {k}"
        assert ctx.budget() == full_budget, f"split at {k}"
        # A snapshot taken earlier is frozen: later appends did not change it.
        assert early_view == _fresh_view(session, messages[:k], events)
        assert early_budget == SessionContext(session, messages[:k], events, _COUNTER).budget()


@pytest.mark.parametrize("key", FIXTURE_KEYS)
def test_stored_session_projects_like_the_parsed_file(key: str, loaded: dict[str, Loaded]) -> None:
    session, messages, events = loaded[key]
    parsed = parse_file(claude_fixture(key))
    assert _fresh_view(session, messages, events) == _fresh_view(parsed.session, parsed.messages, parsed.events)


@pytest.mark.parametrize("key", FIXTURE_KEYS)
def test_budget_total_is_the_sum_of_the_view(key: str, loaded: dict[str, Loaded]) -> None:
    session, messages, events = loaded[key]
    ctx = SessionContext(session, messages, events, _COUNTER)
    view, budget = ctx.view(), ctx.budget()
    assert budget.used == view.total == sum(item.tokens for item in view.items)
    assert {k: v for k, v in budget.components.items() if v} == {k: v for k, v in view.components().items() if v}
    for item in view.items:
        assert item.tokens == sum(item.components.values())
    assert budget.effective_window == budget.context_window - budget.output_reserve
    assert budget.free == max(0, budget.effective_window - budget.used)
    assert budget.used > 0


@pytest.mark.parametrize("key", FIXTURE_KEYS)
def test_one_request_per_api_message_in_file_order(key: str, loaded: dict[str, Loaded]) -> None:
    path = claude_fixture(key)
    session, messages, events = loaded[key]
    view = _fresh_view(session, messages, events)
    last = last_usage_by_id(path)
    assert [r.message_id for r in view.requests] == assistant_ids(path)
    by_id = {m.id: m for m in messages}
    boundary_index = next((m.index for m in messages if m.kind == "compact_boundary"), None)
    previous: dict[str | None, int] = {}
    for r in view.requests:
        assert r.reported_input_tokens == usage_input_total(last[r.message_id])
        assert r.model == by_id[r.message_id].model
        assert r.estimated_input_tokens >= 0
        if boundary_index is not None and by_id[r.message_id].index > boundary_index:
            previous.clear()  # the compaction drops every anchor
            boundary_index = None
        assert r.anchor_input_tokens == previous.get(r.model), "anchored on the last report of the same model"
        previous[r.model] = r.reported_input_tokens


@pytest.mark.parametrize("key", [k for k in FIXTURE_KEYS if CLAUDE_FIXTURES[k].assistant_ids > 1])
def test_estimates_track_the_reported_usage(key: str, loaded: dict[str, Loaded]) -> None:
    """The estimate before each anchored request is close to what the API then reported."""
    session, messages, events = loaded[key]
    view = _fresh_view(session, messages, events)
    errors = [
        abs(r.estimated_input_tokens - r.reported_input_tokens) / r.reported_input_tokens
        for r in view.requests
        if r.anchor_input_tokens is not None
    ]
    assert len(errors) >= CLAUDE_FIXTURES[key].assistant_ids - 1 - CLAUDE_FIXTURES[key].compactions
    assert statistics.median(errors) < 0.03
    assert max(errors) < 0.20
    for c in view.compactions:
        assert c.reported_pre_tokens == COMPACT_PRE_TOKENS
        assert abs(c.estimated_pre_tokens - c.reported_pre_tokens) / c.reported_pre_tokens < 0.10


@pytest.mark.parametrize("key", FIXTURE_KEYS)
def test_request_estimate_does_not_depend_on_its_own_usage(key: str, tmp_path: Path) -> None:
    original = claude_fixture(key)
    ids = assistant_ids(original)
    target = ids[len(ids) // 2]
    changed = tmp_path / original.name
    with original.open(encoding="utf-8") as src, changed.open("w", encoding="utf-8") as dst:
        for line in src:
            record = json.loads(line)
            if record.get("type") == "assistant" and record["message"]["id"] == target:
                usage = record["message"]["usage"]
                usage["input_tokens"] += 12_345
                usage["cache_read_input_tokens"] = usage.get("cache_read_input_tokens", 0) + 6_789
                line = json.dumps(record) + "\n"
            dst.write(line)

    def requests(path: Path) -> list:  # type: ignore[type-arg]
        parsed = parse_file(path)
        return list(_fresh_view(parsed.session, parsed.messages, parsed.events).requests)

    before, after = requests(original), requests(changed)
    j = ids.index(target)
    assert before[:j] == after[:j]
    assert after[j].reported_input_tokens == before[j].reported_input_tokens + 12_345 + 6_789
    assert after[j].estimated_input_tokens == before[j].estimated_input_tokens, "the estimate came before the report"
    if j + 1 < len(ids):
        assert after[j + 1].anchor_input_tokens == after[j].reported_input_tokens
        assert after[j + 1].estimated_input_tokens != before[j + 1].estimated_input_tokens


def test_view_after_compaction_starts_at_the_boundary(loaded: dict[str, Loaded]) -> None:
    session, messages, events = loaded["258c7280"]
    view = _fresh_view(session, messages, events)
    boundary = next(m for m in messages if m.kind == "compact_boundary")
    assert boundary.source["lines"] == [COMPACT_BOUNDARY_LINE]
    indexes = [item.index for item in view.items if item.kind == "message"]
    assert indexes and min(indexes) > boundary.index  # type: ignore[operator]
    # The whole pre-compaction transcript is still there: nothing was deleted (plus the boundary, and the files
    # Claude Code re-attached after it).
    assert len(messages) == CLAUDE_FIXTURES["258c7280"].assistant_ids + CLAUDE_FIXTURES["258c7280"].user_records + 2


# --- overlay effects --------------------------------------------------------------

BIG_OUTPUT = "\n".join(f"line {i}: some output from the tool with words" for i in range(200))


def _tool_session() -> tuple[Session, list[Message]]:
    sid = "ov"
    messages = [
        Message(id="u1", session_id=sid, index=0, role="user", parts=[TextPart(text="Read the log")]),
        Message(id="a1", session_id=sid, index=1, role="assistant", model="claude-sonnet-4-5",
                parts=[ToolUsePart(id="t1", name="Read", input={"path": "app.log"})],
                usage=Usage(input_tokens=10, output_tokens=30, cache_creation_input_tokens=4000, model="claude-sonnet-4-5")),
        Message(id="r1", session_id=sid, index=2, role="user", kind="tool_result",
                parts=[ToolResultPart(tool_use_id="t1", text=BIG_OUTPUT)]),
        Message(id="a2", session_id=sid, index=3, role="assistant", model="claude-sonnet-4-5",
                parts=[TextPart(text="The log looks fine.")],
                usage=Usage(input_tokens=10, output_tokens=8, cache_read_input_tokens=6000, model="claude-sonnet-4-5")),
    ]
    return Session(id=sid, model="claude-sonnet-4-5"), messages


def _event(n: int, action: str, message_id: str, part: int | None = None, **kw: object) -> OverlayEvent:
    return OverlayEvent(id=f"e{n}", session_id="ov", plan_id=f"p{n}", action=action, message_id=message_id,  # type: ignore[arg-type]
                        part_index=part, **kw)  # type: ignore[arg-type]


def test_prune_substitutes_a_placeholder_and_keeps_the_transcript() -> None:
    session, messages = _tool_session()
    plain = SessionContext(session, messages, [], _COUNTER).view()
    pruned_ctx = SessionContext(session, messages, [_event(1, "prune", "r1", 0)], _COUNTER)
    pruned = pruned_ctx.view()
    item = pruned.item_for("r1")
    assert item is not None and "pruned" in item.badges
    assert item.parts[0].text == PRUNED_PLACEHOLDER  # type: ignore[union-attr]
    assert item.tokens < plain.item_for("r1").tokens / 10  # type: ignore[union-attr]
    assert pruned_ctx.messages[2].parts[0].text == BIG_OUTPUT  # type: ignore[union-attr]
    assert pruned_ctx.budget().used == pruned.total


def test_undone_and_restored_events_have_no_effect() -> None:
    session, messages = _tool_session()
    plain = SessionContext(session, messages, [], _COUNTER).view()
    undone = _event(1, "prune", "r1", 0, undone=True)
    assert SessionContext(session, messages, [undone], _COUNTER).view() == plain
    restored = [_event(1, "prune", "r1", 0), _event(2, "restore", "r1", 0)]
    assert SessionContext(session, messages, restored, _COUNTER).view() == plain


def test_archive_and_offload() -> None:
    session, messages = _tool_session()
    archived = SessionContext(session, messages, [_event(1, "archive", "r1")], _COUNTER).view()
    assert archived.item_for("r1") is None and archived.excluded["r1"] == "archived"
    offloaded = SessionContext(session, messages, [_event(1, "offload", "r1", 0, data={"ref_id": "blob-42"})], _COUNTER).view()
    item = offloaded.item_for("r1")
    assert item is not None and "offloaded" in item.badges
    assert "blob-42" in item.parts[0].text  # type: ignore[union-attr]


def test_apply_events_equals_a_fresh_build() -> None:
    session, messages = _tool_session()
    events = [_event(1, "pin", "u1"), _event(2, "prune", "r1", 0)]
    ctx = SessionContext(session, messages, [], _COUNTER)
    ctx.view()
    ctx.apply_events(events)
    fresh = SessionContext(session, messages, events, _COUNTER)
    assert ctx.view() == fresh.view()
    assert ctx.budget() == fresh.budget()
    assert "PERSIST" in ctx.view().item_for("u1").badges  # type: ignore[union-attr]


# --- properties on generated sessions ----------------------------------------------

MODELS = ["claude-sonnet-4-5-20250929", "claude-opus-4-6", "mystery-model-7", None]
_text = st.text(alphabet="abcdefgh ijk.,\n{}\"é日😀", max_size=50)
_usage_amount = st.integers(min_value=0, max_value=40_000)


@st.composite
def _sessions(draw: st.DrawFn) -> tuple[Session, list[Message], list[OverlayEvent]]:
    sid = "gen"
    n = draw(st.integers(min_value=1, max_value=14))
    messages: list[Message] = []
    events: list[OverlayEvent] = []
    open_tools: list[str] = []
    for i in range(n):
        mid = f"m{i}"
        kind = draw(st.sampled_from(["user", "assistant", "assistant", "tool_result", "boundary"]))
        sidechain = draw(st.integers(min_value=0, max_value=5)) == 0 and kind != "boundary"
        if kind == "user":
            message = Message(id=mid, session_id=sid, index=i, role="user", sidechain=sidechain,
                              kind=draw(st.sampled_from(["message", "message", "summary"])),
                              parts=[TextPart(text=draw(_text))])
        elif kind == "assistant":
            model = draw(st.sampled_from(MODELS))
            parts: list[Part] = []
            for j in range(draw(st.integers(min_value=1, max_value=3))):
                block = draw(st.sampled_from(["text", "thinking", "tool_use"]))
                if block == "text":
                    parts.append(TextPart(text=draw(_text)))
                elif block == "thinking":
                    parts.append(ThinkingPart(text=draw(_text), redacted=draw(st.booleans())))
                else:
                    open_tools.append(f"t{i}_{j}")
                    parts.append(ToolUsePart(id=f"t{i}_{j}", name=draw(st.sampled_from(["Bash", "Read", "Grep"])),
                                             input={"arg": draw(_text)}))
            usage = draw(st.none() | st.builds(Usage, input_tokens=_usage_amount, output_tokens=_usage_amount,
                                               cache_creation_input_tokens=_usage_amount,
                                               cache_read_input_tokens=_usage_amount, model=st.just(model)))
            message = Message(id=mid, session_id=sid, index=i, role="assistant", model=model, usage=usage,
                              sidechain=sidechain, parts=parts)
        elif kind == "tool_result":
            tool_id = open_tools.pop() if open_tools else "dangling"
            message = Message(id=mid, session_id=sid, index=i, role="user", kind="tool_result", sidechain=sidechain,
                              parts=[ToolResultPart(tool_use_id=tool_id, text=draw(_text), is_error=draw(st.booleans()))])
            if draw(st.booleans()):
                events.append(OverlayEvent(id=f"e{len(events)}", session_id=sid, plan_id="prune", action="prune",
                                           message_id=mid, part_index=0, undone=draw(st.booleans())))
        else:
            message = Message(id=mid, session_id=sid, index=i, role="system", kind="compact_boundary",
                              agent_visible=False, parts=[TextPart(text="Conversation compacted")])
            events.append(OverlayEvent(id=f"e{len(events)}", session_id=sid, plan_id="compact", action="pivot",
                                       message_id=mid, data={"trigger": "auto", "pre_tokens": draw(_usage_amount)}))
        if kind != "boundary" and draw(st.integers(min_value=0, max_value=6)) == 0:
            events.append(OverlayEvent(id=f"e{len(events)}", session_id=sid, plan_id="hide", action="archive",
                                       message_id=mid))
        messages.append(message)
    return Session(id=sid, model=draw(st.sampled_from(MODELS))), messages, events


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(generated=_sessions(), data=st.data())
def test_property_incremental_equals_full_and_budget_sums_the_view(
    generated: tuple[Session, list[Message], list[OverlayEvent]], data: st.DataObject
) -> None:
    session, messages, events = generated
    full = SessionContext(session, messages, events, _COUNTER)
    k = data.draw(st.integers(min_value=0, max_value=len(messages)), label="split")
    ctx = SessionContext(session, messages[:k], events, _COUNTER)
    for message in messages[k:]:
        ctx.append(message)
        assert ctx.budget().used == ctx.view().total
    view = full.view()
    assert ctx.view() == view
    assert ctx.budget() == full.budget()
    assert project(session.id, messages, fold(events), _COUNTER, model=session.model) == view

    budget = full.budget()
    assert budget.used == view.total == sum(item.tokens for item in view.items)
    assert budget.effective_window == budget.context_window - budget.output_reserve

    state = fold(events)
    in_view = [item.message_id for item in view.items if item.kind == "message"]
    assert len(in_view) == len(set(in_view))
    for m in messages:
        assert (m.id in in_view) != (m.id in view.excluded), f"{m.id} is either in the view or excluded, with a reason"
        if m.sidechain:
            assert view.excluded[m.id] == "sidechain"
        if m.id in state.archived and not m.sidechain and m.kind != "compact_boundary":
            assert m.id not in in_view
    pivots = [m.index for m in messages if m.kind == "compact_boundary"]
    if pivots:
        assert all(item.index > pivots[-1] for item in view.items if item.kind == "message")  # type: ignore[operator]
    assert len(view.compactions) == len(pivots)

    # Requests: every visible, non-sidechain message with a reported input, in order.
    expected = []
    for m in messages:
        if m.sidechain or not m.agent_visible or m.id in state.archived:
            continue
        if m.usage is not None and m.usage.total_input > 0:
            expected.append(m.id)
    assert [r.message_id for r in view.requests] == expected
    for item in view.items:
        for part in item.parts:
            if isinstance(part, ToolResultPart) and item.message_id is not None and state.is_pruned(item.message_id, 0):
                assert part.text == PRUNED_PLACEHOLDER


def test_project_is_pure() -> None:
    """Projecting twice with the same inputs gives equal views and leaves the inputs as they were."""
    session, messages = _tool_session()
    events = [_event(1, "prune", "r1", 0)]
    before = [m.model_dump() for m in messages]
    state = fold(events)
    first = project(session.id, messages, state, _COUNTER, model=session.model)
    second = project(session.id, messages, state, _COUNTER, model=session.model)
    assert first == second
    assert [m.model_dump() for m in messages] == before
    assert state == fold(events)


def test_import_never_writes_beside_the_transcript(tmp_path: Path) -> None:
    """Importing reads the transcript in place: the file and its directory are unchanged."""
    src = tmp_path / "transcripts" / "session.jsonl"
    src.parent.mkdir()
    shutil.copyfile(claude_fixture("short"), src)
    before = src.read_bytes(), src.stat().st_mtime_ns
    with Store(tmp_path / "wb.db") as store:
        import_file(store, src)
    assert sorted(p.name for p in src.parent.iterdir()) == ["session.jsonl"]
    assert (src.read_bytes(), src.stat().st_mtime_ns) == before


@given(st.text(alphabet=st.sampled_from("ab \n\t"), max_size=600), st.integers(min_value=0, max_value=200))
def test_one_line_reads_a_prefix_and_gives_what_joining_every_word_gives(text: str, width: int) -> None:
    assert one_line(text, width) == " ".join(text.split())[:width]
