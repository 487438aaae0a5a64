"""The prompt builder (spec 001 §4): section order, cache breakpoints and token counts, checked on the
exact requests the real agent sends to a loopback Messages API."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from loopback_api import LoopbackAPI, text
from prompt_harness import (
    MODEL,
    assert_counted_as_sent,
    breakpoints,
    done,
    reply,
    section,
    sent,
    start,
    system_texts,
)

from workbench.engine.agent.prompt import (
    BASE_INSTRUCTIONS,
    PromptBuilder,
    PromptSection,
    fixed_items,
    place_breakpoints,
    usage_note,
)
from workbench.engine.agent.tools import builtin_tools
from workbench.engine.context.budget import BudgetConfig
from workbench.engine.context.session import SessionContext
from workbench.engine.settings.config import Config
from workbench.engine.settings.sections import PromptConfig, SkillsConfig
from workbench.engine.transcript.models import Message, Session, TextPart
from workbench.engine.transcript.store import Store
from workbench.engine.transcript.tokens import TokenCounter

pytestmark = pytest.mark.filterwarnings("ignore:The model .* is deprecated:DeprecationWarning")

RULES = "# Rules\n\nUse tabs. Never push to main.\n"
CLAUDE = "# Claude notes\n\nRun the tests with `make test`.\n"
MEMORY = "The user prefers short answers.\n"
SKILL = "---\nname: reviewer\ndescription: Careful code review\n---\nReview every diff line by line.\n"


def full_workspace(ws: Path, home: Path) -> Config:
    """AGENTS.md, CLAUDE.md, a plan, cross-session memories and an active skill."""
    (ws / "AGENTS.md").write_text(RULES)
    (ws / "CLAUDE.md").write_text(CLAUDE)
    (ws / "docs" / "plan").mkdir(parents=True)
    (ws / "docs" / "plan" / "01-vision.md").write_text("# Vision\n\nInvoices that add up.\n")
    memories = home / "memories"
    memories.mkdir()
    (memories / "user.md").write_text(MEMORY)
    skills = ws / ".workbench" / "skills"
    skills.mkdir(parents=True)
    (skills / "reviewer.md").write_text(SKILL)
    return Config(prompt=PromptConfig(memories=str(memories)), skills=SkillsConfig(active=["reviewer"]))


# --- requests -----------------------------------------------------------------------------


def test_a_bare_workspace_sends_the_base_instructions_and_tools_with_two_breakpoints(
    store: Store, api: LoopbackAPI, workspace: Path
) -> None:
    api.queue(done())
    run = start(store, api, workspace)
    run.send("hello")
    [body] = run.bodies
    assert body["system"] == [{"type": "text", "text": BASE_INSTRUCTIONS, "cache_control": {"type": "ephemeral"}}]
    names = [t["name"] for t in body["tools"]]
    assert names == [*builtin_tools().tools, "prune", "distill"], "built-ins, then the model's DCP tools"
    assert "tool_search" not in names and "skill" not in names, "meta tools only appear when they are of use"
    assert breakpoints(body) == ([0], [names[-1]])
    # The same prompt as the stateless fixed_items() of a workspace with nothing in it.
    counter = TokenCounter()
    registry = run.setup.agent.tools
    definitions = [*builtin_tools().definitions(), *(registry.tools[n].definition() for n in ("prune", "distill"))]
    expected = fixed_items(counter, BASE_INSTRUCTIONS, definitions)
    assert [i.tools for i in run.provider.calls[0].items] == [i.tools for i in expected]
    assert_counted_as_sent(body, run.provider.calls[0])


def test_sections_go_static_to_dynamic_with_breakpoints_at_stability_boundaries(
    store: Store, api: LoopbackAPI, workspace: Path, tmp_path: Path
) -> None:
    config = full_workspace(workspace, tmp_path)
    api.queue(done())
    run = start(store, api, workspace, config)
    run.agent.prompt.scratchpad = "Next: check the rounding."
    run.send("hello")
    [body] = run.bodies
    [call] = run.provider.calls
    texts = system_texts(body)
    assert [i.kind for i in call.items] == ["system", "memory", "project", "memory", "skills", "system", "tools"]
    assert texts[0] == BASE_INSTRUCTIONS
    assert texts[1] == (f'<project_rules source="AGENTS.md">\n{RULES.strip()}\n</project_rules>\n'
                        f'<project_rules source="CLAUDE.md">\n{CLAUDE.strip()}\n</project_rules>')
    assert texts[2].startswith("<project_context>\n## Project Plan\n### Vision (docs/plan/01-vision.md)")
    assert texts[3] == f'<memories source="user.md">\n{MEMORY.strip()}\n</memories>'
    assert texts[4] == ('<active_skills>\n<skill name="reviewer">\nReview every diff line by line.\n</skill>\n'
                        "</active_skills>")
    assert texts[5] == "<scratchpad>\nNext: check the rounding.\n</scratchpad>"
    # Breakpoints: after the per-session sections (rules, plan, memories), after the skills, on the last tool,
    # and on the conversation's last message: four, the API's limit (the base instructions' own boundary is the
    # one left out: the per-session mark after it covers it whenever the session is unchanged).
    system_marks, tool_marks = breakpoints(body)
    assert system_marks == [3, 4]
    assert tool_marks == [body["tools"][-1]["name"]] == ["skill"]
    assert "cache_control" in body["messages"][-1]["content"][-1]
    assert json.dumps(body).count('"cache_control"') == 4
    assert_counted_as_sent(body, call)
    assert section(body, call, "skills") == [texts[4]]


def test_budget_components_are_the_tokens_of_what_was_sent(
    store: Store, api: LoopbackAPI, workspace: Path, tmp_path: Path
) -> None:
    config = full_workspace(workspace, tmp_path)
    api.queue(reply(text("one")), reply(text("two")))
    run = start(store, api, workspace, config)
    run.send("first", "second")
    counter = TokenCounter()
    for body, call in zip(run.bodies, run.provider.calls, strict=True):
        assert_counted_as_sent(body, call, counter)
        per_kind = {k: sum(counter.count_text(t) for t in section(body, call, k))
                    for k in ("system", "project", "memory", "skills")}
        assert {k: call.budget.components[k] for k in per_kind} == per_kind
        assert call.budget.components["tools"] == counter.count_text(json.dumps(body["tools"], ensure_ascii=False))
        assert call.budget.deferred_tool_tokens == 0
    assert sent(run.bodies[0])["system"] == sent(run.bodies[1])["system"], "a stable prompt between turns"


def test_fewer_breakpoints_when_configured(store: Store, api: LoopbackAPI, workspace: Path, tmp_path: Path) -> None:
    config = full_workspace(workspace, tmp_path)
    config.prompt.max_cache_breakpoints = 2
    api.queue(done())
    run = start(store, api, workspace, config)
    run.send("hello")
    assert breakpoints(run.bodies[0]) == ([4], ["skill"]), "the last cacheable section first, then the tools"


def test_place_breakpoints_never_exceeds_the_limit() -> None:
    sections = [PromptSection(f"s{i}", "system", "x", True, tier) for i, tier in enumerate([0, 1, 1, 2, 2])]
    sections.append(PromptSection("note", "system", "n", False, 3))
    for limit in range(5):
        marks, tool = place_breakpoints(sections, 3, limit)
        assert len(marks) + int(tool) == min(limit, 4)
    assert place_breakpoints(sections, 3, 4) == ({0, 2, 4}, True)
    assert place_breakpoints(sections, 0, 4) == ({0, 2, 4}, False)


def test_cache_hit_rate_is_reported_per_request(store: Store, api: LoopbackAPI, workspace: Path) -> None:
    api.queue(reply(text("one"), input_tokens=1000, cache_write=3000),
              reply(text("two"), input_tokens=200, cache_read=3000, cache_write=100))
    run = start(store, api, workspace)
    run.send("first", "second")
    requests = run.agent.ctx.view().requests
    assert [r.cache_read_input_tokens for r in requests] == [0, 3000]
    assert [r.cache_creation_input_tokens for r in requests] == [3000, 100]
    assert [r.cache_hit_rate for r in requests] == [0.0, 3000 / 3300]
    assert run.agent.ctx.budget().cache_hit_rate == 3000 / 3300


# --- the builder on its own ------------------------------------------------------------------


def _context(workspace: Path, text_: str, config: Config) -> SessionContext:
    session = Session(id="s-1", model=MODEL)
    message = Message(id="m-1", session_id="s-1", index=0, role="user", parts=[TextPart(text=text_)])
    return SessionContext(session, [message], [], config=config)


def test_usage_note_is_a_last_non_cacheable_section_from_80_percent(workspace: Path) -> None:
    words = " ".join(f"word{i}" for i in range(3000))
    probe = _context(workspace, words, Config())
    builder = PromptBuilder(workspace)
    probe.set_fixed_items(builder.build(probe, builtin_tools(), BASE_INSTRUCTIONS))
    used = probe.budget().used
    config = Config(budget=BudgetConfig(output_reserve=0, context_window=int(used / 0.86)))
    ctx = _context(workspace, words, config)
    for _ in range(2):  # the second build sees the budget with the first one's items
        ctx.set_fixed_items(builder.build(ctx, builtin_tools(), BASE_INSTRUCTIONS))
    percent = ctx.budget().percent
    assert 80 <= percent < 95
    system = [i for i in ctx.fixed_items if i.kind == "system"]
    assert system[-1].parts[0].text.startswith("[Context: ") and not system[-1].cacheable  # type: ignore[union-attr]
    assert system[0].cacheable
    assert usage_note(83.4) == ("[Context: 83% used. You can call compact_context to free space before continuing "
                                "with large operations.]")


def test_an_edited_agents_md_is_read_again(workspace: Path) -> None:
    (workspace / "AGENTS.md").write_text("Rule one.\n")
    builder = PromptBuilder(workspace)
    ctx = _context(workspace, "hi", Config())
    first = builder.build(ctx, builtin_tools(), BASE_INSTRUCTIONS)
    (workspace / "AGENTS.md").write_text("Rule one.\nRule two, added later.\n")
    second = builder.build(ctx, builtin_tools(), BASE_INSTRUCTIONS)
    assert "Rule two" not in first[1].parts[0].text  # type: ignore[union-attr]
    assert "Rule two" in second[1].parts[0].text  # type: ignore[union-attr]


def test_unusable_memory_files_warn_and_the_session_goes_on(
    store: Store, api: LoopbackAPI, workspace: Path
) -> None:
    (workspace / "AGENTS.md").mkdir()
    (workspace / "CLAUDE.md").write_bytes(b"caf\xe9 rules\n")
    api.queue(done("Still here."))
    run = start(store, api, workspace, Config(prompt=PromptConfig(memories="no-such-memories.md")))
    run.send("hello")
    warnings = run.warnings("memory")
    assert any("AGENTS.md is a directory" in w for w in warnings), warnings
    assert any("CLAUDE.md is not UTF-8 text" in w for w in warnings), warnings
    assert any("no-such-memories.md" in w and "not found" in w for w in warnings), warnings
    assert system_texts(run.bodies[0]) == [BASE_INSTRUCTIONS]
    assert run.agent.ctx.messages[-1].text == "Still here."


def test_memory_files_and_skills_stay_in_the_workspace_and_the_system_prompt_is_redacted(
    store: Store, api: LoopbackAPI, workspace: Path
) -> None:
    outside = workspace.parent / "outside-the-workspace"
    outside.mkdir()
    (outside / "private.md").write_text("PRIVATE NOTES FROM OUTSIDE\n")
    key = "sk-ant-api03-" + "Qx7Lw9Zp4Rk2" * 8
    (workspace / "AGENTS.md").write_text(f"Use the staging key: ANTHROPIC_API_KEY={key}\n")
    (workspace / "CLAUDE.md").symlink_to(outside / "private.md")
    (workspace / "loop.md").symlink_to("loop.md")
    memories = workspace.parent / "my-memories"  # the user's own folder, named in the config: read, but confined
    memories.mkdir()
    (memories / "kept.md").write_text("A memory that stays.\n")
    (memories / "escape.md").symlink_to(outside / "private.md")
    skills = workspace / ".workbench" / "skills"
    skills.mkdir(parents=True)
    (skills / "leak.md").symlink_to(outside / "private.md")
    api.queue(done("Read."))
    config = Config(prompt=PromptConfig(memory_files=["AGENTS.md", "CLAUDE.md", "loop.md", str(outside / "private.md")],
                                        memories=str(memories)))
    run = start(store, api, workspace, config)
    run.send("hello")
    system = "\n".join(system_texts(api.bodies[0]))
    assert "PRIVATE NOTES" not in json.dumps(api.bodies), "a file outside the workspace reached the model"
    assert key not in json.dumps(api.bodies) and "[REDACTED:anthropic-key]" in system
    assert "A memory that stays." in system
    warnings = run.warnings("memory")
    # CLAUDE.md (the absolute path is the same file, read once) and escape.md, out of the memories folder
    assert sum("outside the workspace" in w for w in warnings) == 2, warnings
    assert any("loop.md" in w and "loop" in w for w in warnings), warnings
    assert any("leak.md" in w and "outside the workspace" in w for w in run.warnings("skills")), run.warnings()
    assert run.agent.ctx.messages[-1].text == "Read."
