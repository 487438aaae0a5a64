"""Budget: thresholds at exact boundaries, window arithmetic, config overrides, model limits."""

from __future__ import annotations

from pathlib import Path

import pytest
from helpers import basic_conversation, cc_assistant, cc_usage, cc_user, claude_fixture, text_block, write_jsonl

from workbench.engine.context.budget import COMPONENTS, budget_from_totals, budget_from_view
from workbench.engine.context.session import SessionContext
from workbench.engine.errors import ConfigError
from workbench.engine.settings.config import BudgetConfig, Config, defaults, load_config
from workbench.engine.settings.limits import FALLBACK, KNOWN_MODELS, ModelLimits, lookup
from workbench.engine.transcript.importers import import_file
from workbench.engine.transcript.store import Store

LIMITS = ModelLimits(context_window=200_000, max_output=64_000)
"""Effective window 168,000 with the default 32,000 reserve cap."""


def _budget(used: int, config: BudgetConfig | None = None, limits: ModelLimits = LIMITS, **kw: object):  # type: ignore[no-untyped-def]
    return budget_from_totals(
        {"user": used}, model="m", limits=limits, config=config or BudgetConfig(), source="estimated", **kw  # type: ignore[arg-type]
    )


def test_effective_window_is_window_minus_reserve() -> None:
    b = _budget(1000)
    assert (b.context_window, b.output_reserve, b.effective_window) == (200_000, 32_000, 168_000)
    assert b.effective_window == b.context_window - b.output_reserve
    assert b.free == 167_000
    assert b.percent == pytest.approx(100 * 1000 / 168_000, abs=0.01)
    small = _budget(0, limits=ModelLimits(context_window=100_000, max_output=4_096))
    assert (small.output_reserve, small.effective_window) == (4_096, 95_904), "reserve = max output when below the cap"


def test_default_thresholds_are_70_95_98_percent_of_the_effective_window() -> None:
    b = _budget(0)
    assert (b.warn_at, b.compact_at, b.block_at) == (117_600, 159_600, 164_640)
    assert (b.warn_at, b.compact_at, b.block_at) == tuple(round(b.effective_window * s) for s in (0.70, 0.95, 0.98))


@pytest.mark.parametrize(
    ("used", "level"),
    [
        (0, "ok"),
        (117_599, "ok"),
        (117_600, "warn"),
        (159_599, "warn"),
        (159_600, "compact"),
        (164_639, "compact"),
        (164_640, "block"),
        (168_000, "block"),
        (250_000, "block"),
    ],
)
def test_level_changes_exactly_at_the_boundaries(used: int, level: str) -> None:
    b = _budget(used)
    assert b.level == level
    assert b.used == used
    assert b.free == max(0, 168_000 - used)
    assert b.over == (used > 168_000)


def test_used_is_the_sum_of_all_components() -> None:
    totals = {"system": 1200, "tools": 3400, "user": 10, "assistant": 20, "tool_results": 5000, "custom_section": 7}
    b = budget_from_totals(totals, model=None, limits=LIMITS, config=BudgetConfig(), source="reported")
    assert b.used == sum(totals.values())
    assert b.components["custom_section"] == 7, "a component the bar does not know is still counted"
    assert set(COMPONENTS) <= set(b.components)


def test_reserve_never_takes_more_than_half_the_window() -> None:
    b = _budget(0, config=BudgetConfig(output_reserve=150_000))
    assert b.output_reserve == 100_000
    assert b.effective_window == 100_000


def test_window_precedence_explicit_then_config_then_model() -> None:
    assert _budget(0, config=BudgetConfig(context_window=1_000_000)).context_window == 1_000_000
    assert _budget(0, config=BudgetConfig(context_window=1_000_000), context_window=50_000).context_window == 50_000
    assert _budget(0).context_window == LIMITS.context_window


def test_config_file_overrides_thresholds_reserve_and_models(tmp_path: Path) -> None:
    path = tmp_path / "config.toml"
    path.write_text(
        "[budget]\nwarn = 0.5\ncompact = 0.8\nblock = 0.9\noutput_reserve = 10000\n\n"
        '[models."house-model"]\ncontext_window = 50000\nmax_output = 2000\n',
        encoding="utf-8",
    )
    config = load_config(path)
    assert (config.budget.warn, config.budget.compact, config.budget.block) == (0.5, 0.8, 0.9)
    limits, known = lookup("house-model-20250101", config.models)
    assert known and limits.context_window == 50_000
    b = budget_from_totals({"user": 20_000}, model="house-model", limits=limits, config=config.budget, source="estimated")
    assert (b.context_window, b.output_reserve, b.effective_window) == (50_000, 10_000, 40_000)
    assert (b.warn_at, b.compact_at, b.block_at) == (20_000, 32_000, 36_000)
    assert b.level == "warn"


def test_config_drives_a_session_budget(tmp_path: Path) -> None:
    config_path = tmp_path / "config.toml"
    config_path.write_text("[budget]\ncontext_window = 1000000\n", encoding="utf-8")
    with Store(tmp_path / "wb.db") as store:
        session_id = import_file(store, claude_fixture("short")).session.id
        default = SessionContext.load(store, session_id).budget()
        big = SessionContext.load(store, session_id, load_config(config_path)).budget()
    assert default.context_window == 200_000
    assert big.context_window == 1_000_000
    assert big.used == default.used
    assert big.percent < default.percent


def test_missing_config_file_means_defaults(tmp_path: Path) -> None:
    assert load_config(tmp_path / "absent.toml") == Config()
    assert load_config(None) == Config()


def test_the_defaults_made_without_validating_are_what_validating_makes() -> None:
    """``defaults`` makes every section as ``Config()`` does (each a model of its own, nothing marked as set)."""
    made, validated = defaults(Config), Config()
    assert made == validated
    assert made.model_dump() == validated.model_dump()
    sections = [(getattr(made, name), getattr(validated, name)) for name in Config.model_fields]
    assert [type(a) for a, _ in sections] == [type(b) for _, b in sections]
    assert made.model_fields_set == set() and made.strategies.dcp.model_fields_set == set()


def test_variables_fill_what_the_file_leaves_out(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """``WORKBENCH_SECTION__KEY`` sets a key, ``WORKBENCH_SECTION`` a section as JSON; the file wins where both
    set one; the result is a plain :class:`Config` (equal to one built from the same values)."""
    path = tmp_path / "config.toml"
    path.write_text("[budget]\nwarn = 0.5\n", encoding="utf-8")
    monkeypatch.setenv("WORKBENCH_BUDGET__WARN", "0.6")
    monkeypatch.setenv("WORKBENCH_BUDGET__COMPACT", "0.8")
    monkeypatch.setenv("workbench_provider", '{"max_retries": 7}')
    monkeypatch.setenv("WORKBENCH_DATA_DIR", str(tmp_path))  # names no setting: not read as one
    config = load_config(path)
    assert type(config) is Config
    assert (config.budget.warn, config.budget.compact, config.provider.max_retries) == (0.5, 0.8, 7)
    assert config == Config(budget={"warn": 0.5, "compact": 0.8}, provider={"max_retries": 7})
    assert config.model_fields_set == {"budget", "provider"}


@pytest.mark.parametrize(
    ("text", "key"),
    [
        ("[budget]\nwarn = 'lots'\n", "budget.warn"),
        ("[budget]\nwarn = 1.5\n", "budget.warn"),
        ("[budget]\nwran = 0.5\n", "budget.wran"),
        ("[budget]\noutput_reserve = -1\n", "budget.output_reserve"),
        ('[models."x"]\ncontext_window = 1000\n', "models.x.max_output"),
        ("colour = 'blue'\n", "colour"),
    ],
)
def test_bad_config_key_is_named(tmp_path: Path, text: str, key: str) -> None:
    path = tmp_path / "config.toml"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(ConfigError) as info:
        load_config(path)
    assert key in str(info.value)
    assert str(path) in str(info.value)


def test_threshold_order_and_syntax_errors(tmp_path: Path) -> None:
    path = tmp_path / "config.toml"
    path.write_text("[budget]\nwarn = 0.9\ncompact = 0.8\n", encoding="utf-8")
    with pytest.raises(ConfigError, match="warn <= compact <= block"):
        load_config(path)
    path.write_text("[budget\nwarn = \n", encoding="utf-8")
    with pytest.raises(ConfigError, match="cannot read config"):
        load_config(path)


@pytest.mark.parametrize(
    ("model", "expected"),
    [
        ("claude-sonnet-4-5-20250929", "claude-sonnet-4-5"),
        ("claude-sonnet-4-5", "claude-sonnet-4-5"),
        ("claude-opus-4-1-20250805", "claude-opus-4-1"),
        ("claude-opus-4-20250514", "claude-opus-4"),
        ("claude-3-5-haiku-latest", "claude-3-5-haiku"),
        ("Claude-Opus-4-6", "claude-opus-4-6"),
    ],
)
def test_lookup_handles_date_suffixes_and_prefixes(model: str, expected: str) -> None:
    limits, known = lookup(model)
    assert known
    assert limits == KNOWN_MODELS[expected]


@pytest.mark.parametrize("model", [None, "", "llama-99-giant", "gpt"])
def test_unknown_model_gets_the_fallback(model: str | None) -> None:
    assert lookup(model) == (FALLBACK, False)


def test_config_models_override_the_table() -> None:
    custom = ModelLimits(context_window=1_000_000, max_output=128_000)
    assert lookup("claude-opus-4-6-20260101", {"claude-opus-4-6": custom}) == (custom, True)


def test_unknown_model_session_budget_does_not_crash(tmp_path: Path) -> None:
    records = [
        cc_user("u1", "hello"),
        cc_assistant("a1", "msg_01", [text_block("hi")], cc_usage(10, 5, 900, 0), model="llama-99-giant"),
    ]
    with Store(tmp_path / "wb.db") as store:
        session_id = import_file(store, write_jsonl(tmp_path / "x.jsonl", records)).session.id
        ctx = SessionContext.load(store, session_id)
    budget = ctx.budget()
    assert budget.known_model is False
    assert budget.model == "llama-99-giant"
    assert budget.context_window == FALLBACK.context_window
    assert budget.output_reserve == FALLBACK.max_output
    assert budget.used == ctx.view().total > 0


def test_budget_from_view_matches_the_live_budget(tmp_path: Path) -> None:
    with Store(tmp_path / "wb.db") as store:
        session_id = import_file(store, write_jsonl(tmp_path / "c.jsonl", basic_conversation())).session.id
        ctx = SessionContext.load(store, session_id)
    limits, known = ctx.limits()
    assert known
    from_view = budget_from_view(ctx.view(), limits=limits, config=ctx.config.budget, known_model=known)
    assert from_view == ctx.budget()


@pytest.mark.parametrize("name", ["short", "subagent"])
def test_used_is_the_budgets_used(tmp_path: Path, name: str) -> None:
    """Planners ask ``used()`` instead of the whole budget: the same figure, unattributed tokens included."""
    with Store(tmp_path / "wb.db") as store:
        session_id = import_file(store, claude_fixture(name)).session.id
        ctx = SessionContext.load(store, session_id)
    budget = ctx.budget()
    assert ctx.used() == budget.used > 0
    assert budget.components["unattributed"] > 0  # what the usage reports count beyond the items is in it
