"""Model ids in every form, unknown future ids by family, and the 1M window when the session shows it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from helpers import cc_assistant, cc_usage, cc_user, stderr_lines, text_block, write_jsonl

from workbench.cli import main
from workbench.engine.context.session import SessionContext
from workbench.engine.settings.config import BudgetConfig, Config
from workbench.engine.settings.limits import (
    KNOWN_MODELS,
    WINDOW_1M,
    ModelLimits,
    inferred_window,
    lookup,
    model_warning,
)
from workbench.engine.transcript.importers import import_file
from workbench.engine.transcript.store import Store


@pytest.mark.parametrize(
    ("model", "entry"),
    [
        ("claude-opus-4-8", "claude-opus-4-8"),
        ("claude-opus-4-8-20260528", "claude-opus-4-8"),
        ("claude-opus-4-7", "claude-opus-4-7"),
        ("claude-opus-5-5", "claude-opus-5-5"),
        ("claude-opus-5", "claude-opus-5"),
        ("claude-sonnet-5-5", "claude-sonnet-5-5"),
        ("claude-haiku-5-5", "claude-haiku-5-5"),
        ("claude-fable-5-1", "claude-fable-5-1"),
        ("claude-mythos-5", "claude-mythos-5"),
        ("claude-opus-4-6[1m]", "claude-opus-4-6"),
        ("claude-haiku-4-5-20251001", "claude-haiku-4-5"),
        ("claude-3-7-sonnet-latest", "claude-3-7-sonnet"),
        ("claude-sonnet-4-0", "claude-sonnet-4"),
        ("us.anthropic.claude-opus-4-1-20250805-v1:0", "claude-opus-4-1"),
        ("claude-opus-4-5@20251101", "claude-opus-4-5"),
    ],
)
def test_every_current_claude_id_is_known(model: str, entry: str) -> None:
    assert lookup(model) == (KNOWN_MODELS[entry], True)
    assert model_warning(model) is None


def test_a_version_number_is_another_model_not_a_longer_name() -> None:
    """``claude-opus-4`` used to claim ``claude-opus-4-8`` by prefix (200k, 32k output)."""
    limits, known = lookup("claude-opus-4-8")
    assert known and limits.context_window == WINDOW_1M and limits != KNOWN_MODELS["claude-opus-4"]


@pytest.mark.parametrize(("model", "entry"), [("claude-opus-7", "claude-opus-5-5"), ("claude-sonnet-6-1-20270101", "claude-sonnet-5-5"),
                                              ("claude-haiku-9", "claude-haiku-5-5")])
def test_an_unknown_future_id_gets_its_family_and_a_one_line_warning(model: str, entry: str) -> None:
    assert lookup(model) == (KNOWN_MODELS[entry], False)
    warning = model_warning(model)
    assert warning is not None and "\n" not in warning
    assert model in warning and entry in warning


def _transcript(tmp_path: Path, model: str, sizes: list[int], **extra: object) -> Path:
    records: list[dict[str, object]] = []
    for n, size in enumerate(sizes):
        records.append(cc_user(f"u{n}", f"question {n}"))
        records.append(cc_assistant(f"a{n}", f"msg_{n}", [text_block(f"answer {n}")], cc_usage(3, 50, 1_000, size - 1_003),
                                    model=model))
    if extra:
        records.append({"type": "result", "subtype": "success", **extra})
    return write_jsonl(tmp_path / "t.jsonl", records)


def _inspect(capsys: pytest.CaptureFixture[str], path: Path, db: Path, *args: str) -> tuple[dict[str, object], str]:
    assert main(["inspect", str(path), "--json", "--db", str(db), *args]) == 0
    captured = capsys.readouterr()
    report: dict[str, object] = json.loads(captured.out)
    return report, captured.err


def test_inspect_shows_a_1m_window_for_opus_4_8_past_200k_without_configuration(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = _transcript(tmp_path, "claude-opus-4-8", [150_000, 240_000])
    report, err = _inspect(capsys, path, tmp_path / "wb.db")
    assert report["context_window"] == 1_000_000 and report["known_model"] is True
    assert err == ""
    assert main(["inspect", str(path), "--db", str(tmp_path / "wb.db")]) == 0
    assert "window 1,000,000" in capsys.readouterr().out


def test_a_reported_request_past_the_standard_window_reveals_the_1m_context(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = _transcript(tmp_path, "claude-opus-4-6", [150_000, 240_000])
    report, _ = _inspect(capsys, path, tmp_path / "wb.db")
    assert report["context_window"] == 1_000_000
    assert "240,000" in str(report["window_note"])
    (tmp_path / "small").mkdir()
    small = _transcript(tmp_path / "small", "claude-opus-4-6", [150_000])
    report, _ = _inspect(capsys, small, tmp_path / "wb.db")
    assert (report["context_window"], report["window_note"]) == (200_000, None)


def test_the_config_still_overrides_an_inferred_window(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = _transcript(tmp_path, "claude-opus-4-6", [240_000])
    config = tmp_path / "config.toml"
    config.write_text("[budget]\ncontext_window = 500000\n", encoding="utf-8")
    report, _ = _inspect(capsys, path, tmp_path / "wb.db", "--config", str(config))
    assert (report["context_window"], report["window_note"]) == (500_000, None)


def test_claude_codes_recorded_context_window_is_the_sessions(tmp_path: Path) -> None:
    path = _transcript(tmp_path, "claude-opus-4-6", [30_000],
                       modelUsage={"claude-opus-4-6[1m]": {"inputTokens": 3, "contextWindow": 1_000_000}})
    with Store(tmp_path / "wb.db") as store:
        ctx = SessionContext.load(store, import_file(store, path).session.id)
    assert ctx.session.context_window == 1_000_000
    assert ctx.budget().context_window == 1_000_000
    assert ctx.window() == (1_000_000, "recorded in the transcript")


def test_the_model_suffix_and_the_beta_header_select_the_1m_context(tmp_path: Path) -> None:
    limits, _ = lookup("claude-sonnet-4-5")
    assert inferred_window("claude-sonnet-4-5[1m]", limits)[0] == WINDOW_1M
    assert inferred_window("claude-sonnet-4-5", limits, betas=("context-1m-2025-08-07",))[0] == WINDOW_1M
    assert inferred_window("claude-sonnet-4-5", limits, betas=("interleaved-thinking-2025-05-14",)) == (None, None)
    assert inferred_window("claude-sonnet-4-5", limits, peak_input=199_000) == (None, None)
    path = _transcript(tmp_path, "claude-sonnet-4-5", [20_000])
    with Store(tmp_path / "wb.db") as store:
        session = import_file(store, path).session
        store.save_session(session.model_copy(update={"metadata": {**session.metadata,
                                                                    "anthropic_beta": "context-1m-2025-08-07,foo"}}))
        ctx = SessionContext.load(store, session.id)
        assert ctx.budget().context_window == WINDOW_1M
        configured = SessionContext.load(store, session.id, Config(budget=BudgetConfig(context_window=300_000)))
        assert configured.budget().context_window == 300_000


def test_an_unknown_future_model_warns_once_and_says_what_it_assumes(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = _transcript(tmp_path, "claude-opus-7", [20_000])
    report, err = _inspect(capsys, path, tmp_path / "wb.db")
    assert report["known_model"] is False and report["context_window"] == WINDOW_1M
    lines = stderr_lines(err)
    assert len(lines) == 1 and "claude-opus-7" in lines[0] and "claude-opus-5-5" in lines[0]


def test_an_oversized_report_never_widens_a_configured_window(tmp_path: Path) -> None:
    """Spec 002 §3.1: a configured model's window is the user's; one oversized report used to make it 1M."""
    path = _transcript(tmp_path, "my-local-model", [20_000, 70_000])
    config = Config(models={"my-local-model": ModelLimits(context_window=65_536, max_output=8_192)})
    with Store(tmp_path / "wb.db") as store:
        ctx = SessionContext.load(store, import_file(store, path).session.id, config)
        budget = ctx.budget()
    assert ctx.window() == (None, None)
    assert budget.context_window == 65_536
    assert budget.level == "block"


def test_only_a_model_with_a_1m_variant_is_inferred_to_have_it(tmp_path: Path) -> None:
    limits, _ = lookup("claude-haiku-4-5")
    assert limits.context_window_1m is None
    assert inferred_window("claude-haiku-4-5", limits, peak_input=240_000) == (None, None)
    sonnet, _ = lookup("claude-sonnet-4-5")
    assert inferred_window("claude-sonnet-4-5", sonnet, peak_input=240_000)[0] == WINDOW_1M
