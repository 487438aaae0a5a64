"""Export: the full transcript or the projected context, as JSONL or Markdown, secrets redacted."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from helpers import (
    UNSUPPORTED_FIXTURES,
    basic_conversation,
    cc_assistant,
    cc_usage,
    cc_user,
    fixture_path,
    text_block,
    tool_result_block,
    tool_use_block,
    write_jsonl,
)

from workbench.cli import main
from workbench.engine.context.projection import PRUNED_PLACEHOLDER
from workbench.engine.context.session import SessionContext
from workbench.engine.sources.export import export_chunks, redact, redact_value
from workbench.engine.transcript.importers import import_file
from workbench.engine.transcript.store import Store

ANTHROPIC = "sk-ant-api03-" + "A1b2C3d4" * 6
GITHUB = "ghp_" + "a1B2" * 9
AWS = "AKIAIOSFODNN7EXAMPLE"
PEM = "-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAAA\n-----END OPENSSH PRIVATE KEY-----"


def _ctx(store: Store, path: Path) -> SessionContext:
    return SessionContext.load(store, import_file(store, path).session.id)


def _export(ctx: SessionContext, fmt: str, **kw: bool) -> str:
    return "".join(export_chunks(ctx, fmt, **kw))  # type: ignore[arg-type]


@pytest.fixture(scope="module")
def hidden_moon(tmp_path_factory: pytest.TempPathFactory) -> SessionContext:
    db = tmp_path_factory.mktemp("export") / "wb.db"
    with Store(db) as store:
        return _ctx(store, fixture_path(UNSUPPORTED_FIXTURES["opencode-hidden-moon"]))


@pytest.mark.parametrize(
    ("secret", "kind"),
    [
        (ANTHROPIC, "anthropic-key"),
        ("sk-proj-" + "Zx9" * 10, "api-key"),
        (GITHUB, "github-token"),
        ("github_pat_11AAAAAAA0" + "b" * 40, "github-token"),
        (AWS, "aws-key"),
        ("xoxb-123456789012-abcdefABCDEF", "slack-token"),
        (PEM, "private-key"),
    ],
)
def test_known_secret_shapes_are_redacted(secret: str, kind: str) -> None:
    assert redact(f"before {secret} after") == f"before [REDACTED:{kind}] after"


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("Authorization: Bearer eyJhbGciOi.J9eyJzdWIi.OiIxMjM0", "Authorization: Bearer [REDACTED]"),
        ("export API_KEY=abc123def456", "export API_KEY=[REDACTED]"),
        ('{"client_secret": "s3cr3tValue99"}', '{"client_secret": "[REDACTED]"}'),
        ("token: 9f8e7d6c5b4a", "token: [REDACTED]"),
        ("password='hunter2hunter2'", "password='[REDACTED]'"),
    ],
)
def test_assignments_and_headers_are_redacted(text: str, expected: str) -> None:
    assert redact(text) == expected


@pytest.mark.parametrize(
    "text",
    ["max_output_tokens=12000", "input_tokens: 511913", "the token budget is fine", "secret: ${{ secrets.KEY }}",
     "author: Jane Doe", "sk-short"],
)
def test_ordinary_text_is_left_alone(text: str) -> None:
    assert redact(text) == text


def test_secret_named_keys_in_tool_input() -> None:
    value = {"env": {"GITHUB_TOKEN": "plainvalue", "PATH": "/usr/bin"}, "max_tokens": "12000", "args": [ANTHROPIC]}
    assert redact_value(value) == {
        "env": {"GITHUB_TOKEN": "[REDACTED]", "PATH": "/usr/bin"}, "max_tokens": "12000",
        "args": ["[REDACTED:anthropic-key]"],
    }


def _secret_transcript(tmp_path: Path) -> Path:
    return write_jsonl(tmp_path / "secrets.jsonl", [
        cc_user("u1", f"Use my key {ANTHROPIC} please"),
        cc_assistant("a1", "msg_1", [tool_use_block("t1", "Bash", {"command": f"curl -H 'x-api-key: {ANTHROPIC}'",
                                                                   "env": {"AWS_SECRET_ACCESS_KEY": "wJalrXUtnFEMI/K7MDENG"}})],
                     cc_usage(10, 5, 100)),
        cc_user("u2", [tool_result_block("t1", f"{PEM}\nid: {AWS}\n```nested fence```")], parent="a1"),
        cc_assistant("a2", "msg_2", [text_block(f"Done; also found {GITHUB}.")], cc_usage(10, 5, 100, 100)),
    ])


@pytest.mark.parametrize("fmt", ["jsonl", "markdown"])
def test_exports_redact_by_default_and_keep_with_no_redact(fmt: str, tmp_path: Path) -> None:
    with Store(tmp_path / "wb.db") as store:
        ctx = _ctx(store, _secret_transcript(tmp_path))
    redacted = _export(ctx, fmt)
    for secret in (ANTHROPIC, GITHUB, AWS, "wJalrXUtnFEMI/K7MDENG", "b3BlbnNzaC1rZXktdjEAAAAA"):
        assert secret not in redacted
    assert "[REDACTED:anthropic-key]" in redacted and "[REDACTED:private-key]" in redacted
    kept = _export(ctx, fmt, redacted=False)
    assert ANTHROPIC in kept and GITHUB in kept
    # The transcript itself is untouched.
    assert ANTHROPIC in ctx.messages[0].text


def test_full_jsonl_has_every_message_and_the_overlay(hidden_moon: SessionContext) -> None:
    lines = [json.loads(x) for x in _export(hidden_moon, "jsonl").splitlines()]
    header, records = lines[0], lines[1:]
    assert header["type"] == "session" and header["format"] == "opencode" and header["redacted"] is True
    assert [r["id"] for r in records] == [m.id for m in hidden_moon.messages]
    assert sum(len(r.get("overlay", {}).get("pruned_parts", [])) for r in records) == 31
    # The full export keeps the original outputs of the pruned parts.
    assert PRUNED_PLACEHOLDER not in _export(hidden_moon, "jsonl")
    usage = [r["usage"] for r in records if r["usage"]]
    assert sum(u["input_tokens"] for u in usage) == 511_913


def test_projected_jsonl_is_the_view(hidden_moon: SessionContext) -> None:
    lines = [json.loads(x) for x in _export(hidden_moon, "jsonl", projected=True).splitlines()]
    items = lines[1:]
    view = hidden_moon.view()
    assert lines[0]["projected"] is True
    assert [(i["type"], i.get("message_id"), i["tokens"]) for i in items] == [
        (i.kind, i.message_id, i.tokens) for i in view.items
    ]
    texts = [p.get("text") for i in items for p in i.get("parts", [])]
    assert texts.count(PRUNED_PLACEHOLDER) == 31


def test_projected_markdown_shows_placeholders(hidden_moon: SessionContext) -> None:
    text = _export(hidden_moon, "markdown", projected=True)
    assert text.startswith("# Moon + ElysiaJS integration")
    assert text.count(PRUNED_PLACEHOLDER) == 31
    assert "what the model sees now" in text
    full = _export(hidden_moon, "markdown")
    headings = re.findall(r"^## (\d+) · (?:user|assistant|system)\b", full, flags=re.MULTILINE)
    assert [int(n) for n in headings] == list(range(1, len(hidden_moon.messages) + 1))
    assert "[pruned_parts]" in full


def test_markdown_fences_survive_backticks(tmp_path: Path) -> None:
    with Store(tmp_path / "wb.db") as store:
        ctx = _ctx(store, _secret_transcript(tmp_path))
    text = _export(ctx, "markdown")
    assert "````\n" in text, "a result containing ``` is fenced with four backticks"


def test_cli_export_to_a_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = write_jsonl(tmp_path / "t.jsonl", basic_conversation())
    out = tmp_path / "out.md"
    db = tmp_path / "wb.db"
    assert main(["export", str(path), "--output", str(out), "--db", str(db)]) == 0
    _, err = capsys.readouterr()
    assert out.read_text(encoding="utf-8").startswith("# List the files") and "wrote" in err
    assert not (tmp_path / "out.md.partial").exists()
    with Store(db) as store:
        (stored, _), = store.list_sessions()
    assert main(["export", stored.id, "--format", "jsonl", "--projected", "--db", str(db)]) == 0
    printed, _ = capsys.readouterr()
    assert json.loads(printed.splitlines()[0])["id"] == stored.id


def test_cli_export_errors_are_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["export", "no-such-session", "--db", str(tmp_path / "wb.db")]) == 1
    _, err = capsys.readouterr()
    assert err.startswith("workbench: error:") and len(err.strip().splitlines()) == 1
    path = write_jsonl(tmp_path / "t.jsonl", basic_conversation())
    target = tmp_path / "missing-dir" / "out.md"
    assert main(["export", str(path), "-o", str(target), "--db", str(tmp_path / "wb.db")]) == 1
    _, err = capsys.readouterr()
    assert "cannot write" in err
