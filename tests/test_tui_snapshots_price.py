"""The price dialog a change to a proxied agent's context opens first: amounts under a cent said as such, what
the figures assume, and the key of each button."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import orjson
import pytest
from proxy_support import request
from test_tui_proxy import marked, turns
from textual.pilot import Pilot
from tui_fixtures import frozen, isolated_dirs, no_blink, ready, settle  # noqa: F401

from workbench.engine.transcript.models import ToolResultPart
from workbench.proxy.recorder import Recorder
from workbench.proxy.response import Answer
from workbench.tui.app import WorkbenchApp
from workbench.tui.launch import Launch
from workbench.tui.screens.cache_price import CachePriceScreen
from workbench.tui.widgets.message_list import MessageList

SnapCompare = Callable[..., bool]
CHEAP = "claude-haiku-4-5"
"""A model whose re-write of a short session costs less than a tenth of a cent."""

pytestmark = pytest.mark.usefixtures("frozen", "no_toasts")


@pytest.fixture
def no_toasts(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(WorkbenchApp, "notify", lambda self, *args, **kwargs: None)


def recorded(tmp_path: Path) -> Launch:
    """Two requests of a Claude Code-like agent (its last block marked), recorded as the proxy records them."""
    db = tmp_path / "proxy.db"
    recorder = Recorder(db, home=tmp_path)
    first = turns()
    answer: dict[str, Any] = {"type": "text", "text": "It calls setup()."}
    later = [*first, {"role": "assistant", "content": [answer]}, {"role": "user", "content": "And then?"}]
    for messages, reply in ((first, answer), (later, {"type": "text", "text": "Nothing else."})):
        exchange = recorder.prepare(orjson.dumps(request(marked(messages), model=CHEAP)))
        recorder.finish(exchange, 200, Answer(blocks=[reply], complete=True))
    recorder.close()
    assert exchange.placement is not None
    return Launch.open(db, exchange.placement.thread.session_id)


class TestPriceDialog:
    def test_a_prune_priced_under_a_cent(self, snap_compare: SnapCompare, tmp_path: Path) -> None:
        """``x`` on the big tool result: the re-write and the saving are under a tenth of a cent, the dialog
        says so, says what it assumes, and names the keys of its buttons."""

        async def prune(pilot: Pilot[None]) -> None:
            await ready(pilot)
            app = pilot.app
            assert isinstance(app, WorkbenchApp) and app.main_screen.screen_state is not None
            rows = app.main_screen.screen_state.messages
            app.main_screen.query_one(MessageList).cursor = next(
                n for n, m in enumerate(rows) if any(isinstance(p, ToolResultPart) for p in m.parts))
            await pilot.pause()
            await pilot.press("x")
            await settle(pilot)
            assert isinstance(app.screen, CachePriceScreen)
            no_blink(app)
            await pilot.pause()

        assert snap_compare(WorkbenchApp(recorded(tmp_path)), terminal_size=(140, 45), run_before=prune)
