"""The TUI's reading side: loading, the list (filter, sort, jumps), the detail pane, the budget, help, errors."""

from __future__ import annotations

from pathlib import Path

import pytest
from textual.app import App, ComposeResult
from tui_fixtures import (  # noqa: F401  (fixtures are found by name)
    BIG_SESSION_SIZE,
    SIZE,
    Loader,
    big_context,
    demo_context,
    demo_launch,
    demo_loader,
    empty_loader,
    flat,
    isolated_dirs,
    record_toasts,
    settle,
    text_of,
    until,
)

from workbench.cli import resolve
from workbench.engine.context.budget import Budget, budget_from_totals
from workbench.engine.context.pricing import format_usd
from workbench.engine.context.session import SessionContext
from workbench.engine.providers.anthropic import AnthropicProvider
from workbench.engine.settings.config import BudgetConfig, Config
from workbench.engine.settings.limits import lookup
from workbench.engine.transcript.store import Store
from workbench.tui.app import WorkbenchApp
from workbench.tui.launch import Launch
from workbench.tui.screens.help import HelpScreen
from workbench.tui.widgets.budget_panel import BudgetPanel, allocate
from workbench.tui.widgets.filter_bar import FilterBar
from workbench.tui.widgets.format import LEVEL_LABELS
from workbench.tui.widgets.info_bar import InfoBar
from workbench.tui.widgets.message_detail import MessageDetail
from workbench.tui.widgets.message_list import MessageList
from workbench.tui.widgets.row_filter import RowQuery, apply_query
from workbench.tui.widgets.timeline import Timeline

# --- loading ----------------------------------------------------------------------


@pytest.mark.anyio
async def test_demo_loads_one_row_per_message(demo_launch: Launch, demo_context: SessionContext) -> None:
    app = WorkbenchApp(demo_launch)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        messages = app.screen.query_one(MessageList)
        assert messages.row_count == len(demo_context.messages) > 30
        assert messages.has_focus
        assert f"{len(demo_context.messages)} messages" in str(messages.border_title)
        info = app.screen.query_one(InfoBar)
        assert (info.status, info.mode) == ("idle", "imported")  # steerable: not read-only
        assert info.model == "claude-sonnet-4-5-20250929"
        assert "imported claude code transcript, no agent to message" in app.screen.query_one("#input").placeholder


@pytest.mark.anyio
async def test_header_and_timeline_show_what_the_session_cost(demo_launch: Launch, demo_context: SessionContext) -> None:
    cost = demo_context.cost()
    assert cost.basis == "reported" and cost.usd > 0
    app = WorkbenchApp(demo_launch)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        info = app.screen.query_one(InfoBar)
        assert info.cost == format_usd(cost.usd)
        assert format_usd(cost.usd) in flat(text_of(info))
        await until(pilot, lambda: bool(app.screen.query(Timeline)))
        timeline = app.screen.query_one(Timeline)
        await until(pilot, lambda: timeline.data is not None)
        assert str(timeline.border_title).endswith(f"· {format_usd(cost.usd)}")
        assert f"last {format_usd(cost.requests[-1].usd)}" in str(timeline.border_subtitle)


@pytest.mark.anyio
async def test_a_loader_context_is_shown_but_not_steerable(demo_loader: Loader) -> None:
    app = WorkbenchApp(demo_loader)
    said = record_toasts(app)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        assert app.screen.query_one(MessageList).row_count > 30
        await pilot.press("p")
        await settle(pilot)
        assert any("not stored" in n for n in said)



@pytest.mark.anyio
async def test_the_timeline_draws_the_opened_sessions_requests(demo_loader: Loader) -> None:
    """The timeline is on the screen from the start (it no longer waits for the first frame to mount) and
    shows the state the session opened with, drawn."""
    app = WorkbenchApp(demo_loader)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        screen = app.main_screen
        assert screen.screen_state is not None
        timeline = screen.query_one(Timeline)
        assert timeline.data == screen.screen_state.timeline and timeline.data.reported
        assert any("\u2800" < char <= "\u28ff" for char in flat(text_of(timeline)))

@pytest.mark.anyio
async def test_budget_panel_shows_the_budget(demo_launch: Launch, demo_context: SessionContext) -> None:
    budget = demo_context.budget()
    app = WorkbenchApp(demo_launch)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        panel = app.screen.query_one(BudgetPanel)
        assert panel.budget == budget
        painted = text_of(panel)
        assert f"{budget.used:,} of {budget.effective_window:,} usable tokens" in painted
        assert "reported by the API" in painted
        assert f"last request {budget.cache_hit_rate:.1%} cached" in painted
        assert f"Output reserve {budget.output_reserve:,}" in painted
        assert panel.has_class("-ok")


@pytest.mark.anyio
async def test_bad_target_shows_the_error_and_q_quits(tmp_path: Path) -> None:
    app = WorkbenchApp(Launch.open(tmp_path / "t.db", str(tmp_path / "missing.jsonl")))
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        assert app.screen.has_class("-failed")
        status = flat(text_of(app.screen.query_one("#status-text")))
        assert app.screen.query_one("#status-text").border_title == "Could not open the session"
        assert "missing.jsonl: no such file, and no stored session with that id" in status
        assert "Traceback" not in status
        assert not app.screen.query_one("#body").display
        await pilot.press("q")
    assert app.return_code == 0


@pytest.mark.anyio
async def test_unexpected_failure_is_reported_with_a_log(isolated_dirs: Path) -> None:
    def loader() -> SessionContext:
        raise RuntimeError("disk on fire")

    app = WorkbenchApp(loader)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        status = flat(text_of(app.screen.query_one("#status-text")))
        assert "Internal error: RuntimeError: disk on fire" in status
        assert "workbench.log" in status
    log = isolated_dirs / "workbench.log"
    assert "RuntimeError: disk on fire" in log.read_text(encoding="utf-8")


@pytest.mark.anyio
async def test_empty_session(empty_loader: Loader) -> None:
    app = WorkbenchApp(empty_loader)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        messages = app.screen.query_one(MessageList)
        assert messages.row_count == 0 and messages.selected_row is None
        await pilot.press("down", "end", "pageup", "h", "right_square_bracket")
        assert "No messages in this session." in text_of(messages)
        assert "unknown model" in text_of(app.screen.query_one(BudgetPanel))


# --- the list ---------------------------------------------------------------------------


@pytest.mark.anyio
async def test_cursor_keys_move_the_selection_and_the_detail_follows(
    demo_launch: Launch, demo_context: SessionContext
) -> None:
    app = WorkbenchApp(demo_launch)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        messages = app.screen.query_one(MessageList)
        detail = app.screen.query_one(MessageDetail)
        assert messages.cursor == 0
        assert "[PERSIST] Add a `--since` option" in text_of(detail.query_one("#detail-body"))

        await pilot.press("down", "down", "down")
        assert messages.cursor == 3
        selected = demo_context.messages[3]
        assert messages.selected_row is not None and messages.selected_row.message.id == selected.id
        body = flat(text_of(detail.query_one("#detail-body")))
        assert "tool call · Read" in body
        assert '"file_path": "/home/dev/projects/logsift/src/logsift/cli.py"' in body
        assert detail.border_title == "Message #4"

        await pilot.press("end")
        assert messages.cursor == len(demo_context.messages) - 1
        await pilot.press("home")
        assert messages.cursor == 0
        await pilot.press("pagedown")
        assert messages.cursor > 10
        await pilot.press("up")
        await pilot.press("pageup")
        assert messages.cursor == 0

        top = messages.region.y + 2  # border, header, then rows 0, 1, 2
        await pilot.click(MessageList, offset=(10, 4))
        assert messages.cursor == 2 and top > 0

        await pilot.press("enter")
        assert detail.has_focus
        await pilot.press("escape")
        assert messages.has_focus


@pytest.mark.anyio
async def test_filter_by_tool_role_badge_and_text(demo_launch: Launch, demo_context: SessionContext) -> None:
    app = WorkbenchApp(demo_launch)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        messages = app.screen.query_one(MessageList)
        await pilot.press("slash", *"tool:Bash")
        await settle(pilot)
        rows = messages.rows
        assert rows is not None
        shown = [rows.row(messages.transcript_index(i)).message for i in range(messages.row_count)]
        assert shown and len(shown) < len(demo_context.messages)
        names = [{p.name for p in m.tool_uses()} | {rows.tool_calls[p.tool_use_id].name for p in m.tool_results()}
                 for m in shown]
        assert all("Bash" in n for n in names)
        assert "shown (tool:Bash)" in str(messages.border_title)
        await pilot.press("enter")
        assert messages.has_focus

        await pilot.press("slash", *" role:user")
        await settle(pilot)
        assert all(messages.rows.row(messages.transcript_index(i)).message.role == "user"  # type: ignore[union-attr]
                   for i in range(messages.row_count))
        await pilot.press("escape")
        await settle(pilot)
        assert messages.row_count == len(demo_context.messages)
        assert messages.has_focus

        await pilot.press("slash", *"badge:pinned")
        await settle(pilot)
        pinned = [m.id for m in demo_context.messages if m.id in demo_context.overlay.pinned]
        assert [messages.rows.row(messages.transcript_index(i)).message.id  # type: ignore[union-attr]
                for i in range(messages.row_count)] == pinned

        app.screen.query_one(FilterBar).value = '"naive times"'
        await settle(pilot)
        assert messages.row_count >= 1
        assert "naive times" in str(messages.selected_row.message.model_dump()).lower()  # type: ignore[union-attr]

        app.screen.query_one(FilterBar).value = "no such text anywhere"
        await settle(pilot)
        assert messages.row_count == 0
        assert "No message matches the filter." in text_of(messages)


@pytest.mark.anyio
async def test_sort_by_tokens_and_jumps(demo_launch: Launch, demo_context: SessionContext) -> None:
    budget_items = {i.message_id: i.tokens for i in demo_context.view().items if i.message_id}
    heaviest = sorted(budget_items, key=lambda k: budget_items[k], reverse=True)
    app = WorkbenchApp(demo_launch)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        messages = app.screen.query_one(MessageList)
        await pilot.press("h")
        assert messages.selected_row is not None and messages.selected_row.message.id == heaviest[0]
        await pilot.press("h")
        assert messages.selected_row.message.id == heaviest[1]

        await pilot.press("home", "right_square_bracket")
        pinned = [m.id for m in demo_context.messages if m.id in demo_context.overlay.pinned]
        assert messages.selected_row.message.id == pinned[1 % len(pinned)]

        await pilot.press("s")
        await settle(pilot)
        tokens = [messages.rows.tokens(messages.transcript_index(i)) for i in range(messages.row_count)]  # type: ignore[union-attr]
        assert tokens == sorted(tokens, reverse=True)
        assert messages.row_count == len(demo_context.messages)
        await pilot.press("s")
        await settle(pilot)
        assert [messages.transcript_index(i) for i in range(5)] == [0, 1, 2, 3, 4]


def test_query_parsing_and_filtering(demo_context: SessionContext) -> None:
    from workbench.tui.screen_state import ScreenState

    rows = ScreenState.compute(demo_context).rows
    query = RowQuery.parse('role:assistant tool:read "file_path"')
    assert query.roles == {"assistant"} and query.tools == {"read"} and query.words == ("file_path",)
    order = apply_query(rows, query)
    assert order and all(rows.row(i).message.role == "assistant" for i in order)
    assert apply_query(rows, RowQuery()) is None
    assert apply_query(rows, RowQuery.parse("badge:compacted")) == []
    unbalanced = RowQuery.parse('"unclosed quote')
    assert unbalanced.words == ('"unclosed', "quote")


# --- detail ---------------------------------------------------------------------------------


@pytest.mark.anyio
async def test_error_result_and_thinking_show_in_detail(demo_launch: Launch, demo_context: SessionContext) -> None:
    error_index = next(
        i for i, m in enumerate(demo_context.messages) if any(getattr(p, "is_error", False) for p in m.parts)
    )
    app = WorkbenchApp(demo_launch)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        messages = app.screen.query_one(MessageList)
        messages.cursor = error_index
        await pilot.pause()
        body = flat(text_of(app.screen.query_one("#detail-body")))
        assert "tool result · Bash" in body and "· error" in body
        assert "TypeError: can't compare offset-naive and offset-aware datetimes" in body
        messages.cursor = 1
        await pilot.pause()
        assert "thinking" in text_of(app.screen.query_one("#detail-body"))


def test_detail_highlights_tool_input_and_file_reads() -> None:
    from rich.syntax import Syntax

    from workbench.engine.transcript.models import ToolUsePart
    from workbench.tui.widgets.detail_render import text_with_code, tool_input, tool_output
    from workbench.tui.widgets.rows import CallRef

    call = ToolUsePart(id="t1", name="write_file", input={"path": "src/app.py", "content": "x = 1\nprint(x)\n"})
    rendered = tool_input(call)
    assert isinstance(rendered[0], Syntax) and rendered[0].lexer.name == "JSON"  # type: ignore[union-attr]
    assert isinstance(rendered[-1], Syntax) and rendered[-1].lexer.name == "Python"  # type: ignore[union-attr]
    read = CallRef("read_file", 3, {"path": "src/app.py"})
    output = tool_output("     1\tx = 1\n     2\tprint(x)", read)
    assert isinstance(output, Syntax) and output.start_line == 1 and output.code == "x = 1\nprint(x)"
    assert isinstance(tool_output('{"ok": true}', None), Syntax)
    parts = text_with_code("Run this:\n```bash\nmake test\n```\nthen tell me.")
    assert [type(p).__name__ for p in parts] == ["Text", "Syntax", "Text"]


# --- help ------------------------------------------------------------------------------------


@pytest.mark.anyio
async def test_help_key_lists_every_binding_in_words(demo_launch: Launch) -> None:
    from workbench.tui.screens.help import what_it_does

    app = WorkbenchApp(demo_launch)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        await pilot.press("question_mark")
        assert isinstance(app.screen, HelpScreen)
        listed = flat(text_of(app.screen.query_one("#help-body")))
        sections = app.screen.sections()
        bindings = [binding for _, found in sections for binding in found]
        ids = {binding.id for binding in bindings if binding.id}
        assert {"app.quit", "app.help", "app.sessions", "messages.cursor_up", "messages.focus_detail",
                "messages.next_heaviest", "detail.back", "help.close", "steer.pin", "steer.undo", "steer.compact",
                "list.filter", "compaction.apply", "plans.apply", "approval.approve", "sessions.open",
                "input.leave", "filter.clear"} <= ids
        for binding in bindings:
            assert flat(what_it_does(binding)) in listed, binding.id
            assert not binding.id or binding.id not in listed, f"the action's name {binding.id} is shown"
        assert "kept word for word by compaction" in listed  # p, in words
        assert "press Enter to send it" in listed
        await pilot.press("escape")
        assert not isinstance(app.screen, HelpScreen)


@pytest.mark.anyio
async def test_spec001_help_lists_compact_typed_in_the_message_box(demo_launch: Launch) -> None:
    """Spec 001 §7's ``/compact`` is typed, not a key: the help lists it in the message box's section."""
    app = WorkbenchApp(demo_launch)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        await pilot.press("question_mark")
        listed = text_of(app.screen.query_one("#help-body"))
        section = listed[listed.index("Message box"):]
        line = next(line for line in section.splitlines() if "/compact [focus]" in line)
        assert "compaction preview" in flat(section[section.index(line):])
        assert "Back to the message list" in section


@pytest.mark.anyio
async def test_help_follows_a_remapped_key(demo_launch: Launch) -> None:
    app = WorkbenchApp(demo_launch)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        app.set_keymap({"messages.cursor_down": "j", "steer.pin": "P"})
        await pilot.press("j")
        assert app.screen.query_one(MessageList).cursor == 1
        await pilot.press("question_mark")
        listed = text_of(app.screen.query_one("#help-body"))
        assert any(line.split()[:1] == ["j"] and "Select the message below" in line for line in listed.splitlines())
        assert any(line.split()[:1] == ["P"] and "Pin or unpin" in line for line in listed.splitlines())


@pytest.mark.anyio
async def test_steering_is_in_the_command_palette(demo_launch: Launch) -> None:
    app = WorkbenchApp(demo_launch)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        titles = [command.title for command in app.get_system_commands(app.screen)]
        for title in ("Pin / unpin the message", "Prune / restore the message", "Offload / inline the message",
                      "Archive / unarchive the message", "Undo", "Redo", "Strategies: what would they do now",
                      "Compact…", "Sessions"):
            assert title in titles


# --- scale -----------------------------------------------------------------------------------


@pytest.mark.anyio
async def test_100k_messages_stay_virtual(big_context: SessionContext) -> None:
    """No widget per row, and only the visible rows are ever painted."""
    app = WorkbenchApp(lambda: big_context)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        messages = app.screen.query_one(MessageList)
        assert messages.row_count == BIG_SESSION_SIZE
        widgets = len(app.screen.query("*"))
        assert widgets < 150  # the screen's own widgets, the same at 100 rows
        await pilot.press("end")
        for _ in range(5):
            await pilot.press("pageup")
        page = messages.scrollable_content_region.height - 2
        assert messages.cursor == BIG_SESSION_SIZE - 1 - 5 * page
        messages.cursor = BIG_SESSION_SIZE // 2
        await pilot.pause()
        painted = text_of(messages)
        assert f"message {BIG_SESSION_SIZE // 2 + 1}: the quick" in painted
        assert f"{BIG_SESSION_SIZE // 2 + 1:>6}  " in painted
        assert len(messages._strips) < 400  # rows painted so far: a few screens, not 100,000


# --- the budget panel alone ---------------------------------------------------------------------


class BudgetLevels(App[None]):
    """One panel per level, for checking the threshold colours and labels."""

    def compose(self) -> ComposeResult:
        for _ in LEVEL_USAGE.values():
            yield BudgetPanel()

    def on_mount(self) -> None:
        for panel, used in zip(self.query(BudgetPanel), LEVEL_USAGE.values(), strict=True):
            panel.budget = synthetic_budget(used)


LEVEL_USAGE = {"ok": 40_000, "warn": 130_000, "compact": 161_000, "block": 175_000}


def synthetic_budget(used: int, deferred: int = 0) -> Budget:
    limits, _ = lookup("claude-sonnet-4-5")
    totals = {"system": 3_000, "tools": 9_000, "user": 2_000, "assistant": 6_000, "tool_calls": 4_000}
    totals["tool_results"] = used - sum(totals.values())
    return budget_from_totals(
        totals, model="claude-sonnet-4-5", limits=limits, config=BudgetConfig(), source="calibrated",
        cache_hit_rate=None, deferred_tool_tokens=deferred,
    )


@pytest.mark.anyio
async def test_budget_panel_changes_at_each_threshold() -> None:
    app = BudgetLevels()
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.pause()
        for panel, level in zip(app.query(BudgetPanel), LEVEL_USAGE, strict=True):
            assert panel.budget is not None and panel.budget.level == level
            assert panel.has_class(f"-{level}")
            painted = text_of(panel)
            assert LEVEL_LABELS[level] in flat(painted)
            assert "calibrated estimate" in painted


@pytest.mark.anyio
async def test_budget_panel_shows_active_and_deferred_tools() -> None:
    app = BudgetLevels()
    async with app.run_test(size=(120, 40)) as pilot:
        panel = app.query_one(BudgetPanel)
        panel.budget = synthetic_budget(40_000, deferred=12_345)
        await pilot.pause()
        painted = flat(text_of(panel))
        assert "Tool definitions 9,000 active" in painted
        assert "Tools deferred 12,345 not sent" in painted
        assert f"{40_000:,} of" in painted  # deferred tools are not counted as used


def test_allocate_gives_every_component_a_cell() -> None:
    assert allocate([1, 1_000_000, 0], 1_000_001, 10) == [1, 9, 0]
    assert sum(allocate([3, 3, 3], 9, 10)) == 10
    assert allocate([0, 0], 0, 10) == [0, 0]


def test_resolve_error_is_a_workbench_error(tmp_path: Path) -> None:
    from workbench.engine.errors import WorkbenchError

    with Store(tmp_path / "t.db") as store, pytest.raises(WorkbenchError):
        resolve(store, "no-such-session", None)


# --- sessions ---------------------------------------------------------------------------------


@pytest.mark.anyio
async def test_session_picker_and_sub_agent_sessions(tmp_path: Path) -> None:
    from tui_fixtures import synthetic_context

    from workbench.engine.transcript.models import Session
    from workbench.tui.screens.sessions import SessionPicker

    parent = synthetic_context(6)
    child = synthetic_context(3)
    parent_message = parent.messages[3].id
    child_session = Session(id="child", title="Sub-agent (explore): look around", source_format="engine",
                            metadata={"parent_session": "synthetic", "parent_message": parent_message,
                                      "subagent": True})
    child_messages = [m.model_copy(update={"session_id": "child", "id": f"c{i}"}) for i, m in enumerate(child.messages)]
    with Store(tmp_path / "s.db") as store:
        store.save_session(parent.session)
        store.save_messages(parent.messages, parent.counter)
        store.save_session(child_session)
        store.save_messages(child_messages, child.counter)

    app = WorkbenchApp(Launch.open(tmp_path / "s.db", "synthetic"))
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        messages = app.screen.query_one(MessageList)
        messages.cursor = 3
        await pilot.pause()
        assert "sub-agent session: child · press g to open" in flat(text_of(app.screen.query_one("#detail-body")))
        await pilot.press("g")
        await settle(pilot)
        assert app.main_screen.screen_state is not None and app.main_screen.screen_state.session.id == "child"
        await pilot.press("b")
        await settle(pilot)
        assert app.main_screen.screen_state.session.id == "synthetic"

        await pilot.press("ctrl+o")
        await settle(pilot)
        assert isinstance(app.screen, SessionPicker)
        listed = [row.session.id for row in app.screen.sessions]
        assert set(listed) == {"synthetic", "child"}
        assert listed.index("child") == listed.index("synthetic") + 1  # under its parent
        app.screen.query_one("#sessions-table").move_cursor(row=listed.index("child"))  # type: ignore[attr-defined]
        await pilot.press("enter")
        await settle(pilot)
        assert app.main_screen.screen_state.session.id == "child"
        assert messages.row_count == 3


def test_the_live_agent_gets_the_configured_timeout_and_retries(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    assert Launch.open(tmp_path / "t.db", "x").provider_factory is None  # no key: read-only, no provider
    monkeypatch.setenv("ANTHROPIC_API_KEY", "test-key")
    config = Config(provider={"timeout": 7.5, "max_retries": 2})
    for launch in (Launch.open(tmp_path / "t.db", "x", config=config), Launch.demo(tmp_path / "t.db", config)):
        assert launch.provider_factory is not None
        provider = launch.provider_factory()
        assert isinstance(provider, AnthropicProvider)
        assert (provider._client.timeout, provider.max_retries) == (7.5, 2)


@pytest.mark.anyio
async def test_the_list_keeps_its_scroll_when_a_change_lands_under_progress(demo_launch: Launch) -> None:
    """A long steering command covers the list with progress; the new rows arriving under it must not scroll it."""
    app = WorkbenchApp(demo_launch)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        main = app.main_screen
        messages = main.query_one(MessageList)
        await pilot.press("down", "down", "down", "down")
        assert (messages.cursor, messages.scroll_y) == (4, 0)
        main.set_busy(True)  # what the app does after half a second of engine work
        await pilot.pause()
        assert main.screen_state is not None and main.rows is not None
        main.update(main.screen_state, keep=main.rows.message_id(4))  # the change's new snapshot, under the cover
        await pilot.pause()
        main.set_busy(False)
        await pilot.pause()
        assert (messages.cursor, messages.scroll_y) == (4, 0)
