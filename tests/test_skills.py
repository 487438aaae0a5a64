"""Skills: markdown files from the configured directories, switched on by the user (engine API) or the
model (the ``skill`` tool); active ones are the ``skills`` section and budget component."""

from __future__ import annotations

from pathlib import Path

import pytest
from loopback_api import LoopbackAPI, tool_use
from prompt_harness import assert_counted_as_sent, done, reply, section, start

from workbench.engine.agent.loop import Agent
from workbench.engine.agent.skills import SkillError, SkillSet, load_skills, parse_skill
from workbench.engine.settings.config import Config
from workbench.engine.settings.sections import SkillsConfig
from workbench.engine.transcript.store import Store

pytestmark = pytest.mark.filterwarnings("ignore:The model .* is deprecated:DeprecationWarning")

REVIEW = "---\nname: reviewer\ndescription: Careful code review\n---\n# Review\n\nRead every line of the diff.\n"
NOTES = "# Release notes\n\nWrite them for users, not developers.\n"


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    ws = tmp_path / "ws"
    skills = ws / ".workbench" / "skills"
    (skills / "release-notes").mkdir(parents=True)
    (skills / "review.md").write_text(REVIEW)
    (skills / "release-notes" / "SKILL.md").write_text(NOTES)
    return ws


def skills_in(body: dict, call: object) -> list[str]:
    return section(body, call, "skills")  # type: ignore[arg-type]


# --- files ----------------------------------------------------------------------------------


def test_front_matter_is_optional(tmp_path: Path) -> None:
    with_meta = parse_skill(REVIEW, "review", tmp_path / "review.md")
    assert (with_meta.name, with_meta.description) == ("reviewer", "Careful code review")
    assert with_meta.body == "# Review\n\nRead every line of the diff."
    plain = parse_skill(NOTES, "release-notes", tmp_path / "SKILL.md")
    assert (plain.name, plain.description) == ("release-notes", "Release notes")
    assert plain.body == NOTES.strip()


def test_directories_are_searched_in_order_with_warnings_for_bad_files(tmp_path: Path, workspace: Path) -> None:
    other = tmp_path / "more"
    other.mkdir()
    (other / "review.md").write_text("---\nname: reviewer\n---\nA shadowed copy.\n")
    (other / "broken.md").write_bytes(b"\xff\xfe\x00 not text")
    (other / "bad name.md").write_text("---\nname: bad name\n---\nx\n")
    skills, warnings = load_skills([workspace / ".workbench" / "skills", other, tmp_path / "missing"], 10_000)
    assert sorted(skills) == ["release-notes", "reviewer"]
    assert skills["reviewer"].body.endswith("Read every line of the diff.")
    assert any("shadowed by" in w for w in warnings)
    assert any("broken.md is not UTF-8 text" in w for w in warnings)
    assert any("unusable name 'bad name'" in w for w in warnings)


def test_unknown_skill_names_say_which_exist(workspace: Path) -> None:
    skills = SkillSet(workspace, SkillsConfig(active=["nope"]))
    [warning] = skills.load()
    assert "skill 'nope' (skills.active) not found" in warning
    with pytest.raises(SkillError, match="known skills: release-notes, reviewer"):
        skills.activate("missing")


# --- in the requests ---------------------------------------------------------------------------


def test_user_activates_and_deactivates_through_the_engine(store: Store, api: LoopbackAPI, workspace: Path) -> None:
    api.queue(done(), done(), done())
    run = start(store, api, workspace)

    def toggle(agent: Agent) -> None:
        if agent.prompt.skills.active:
            agent.prompt.deactivate_skill("reviewer")
        else:
            agent.prompt.activate_skill("reviewer")

    run.send("one", "two", "three", between=toggle)
    sections = [skills_in(b, c) for b, c in zip(run.bodies, run.provider.calls, strict=True)]
    assert sections == [
        [],
        [('<active_skills>\n<skill name="reviewer">\n# Review\n\nRead every line of the diff.\n</skill>\n'
         "</active_skills>")],
        [],
    ]
    for body, call in zip(run.bodies, run.provider.calls, strict=True):
        assert_counted_as_sent(body, call)
        assert "skill" in [t["name"] for t in body["tools"]]
    assert run.provider.calls[1].budget.components["skills"] > 0
    assert run.provider.calls[2].budget.components.get("skills", 0) == 0


def test_the_model_lists_and_activates_a_skill_with_the_tool(store: Store, api: LoopbackAPI, workspace: Path) -> None:
    api.queue(
        reply(tool_use("toolu_1", "skill", {"action": "list"})),
        reply(tool_use("toolu_2", "skill", {"action": "activate", "name": "release-notes"}),
              tool_use("toolu_3", "skill", {"action": "activate", "name": "nope"})),
        done("Writing the notes."),
    )
    run = start(store, api, workspace)
    run.send("Write release notes")
    _first, second, third = run.bodies
    listing = second["messages"][-1]["content"][0]["content"]
    assert listing == ("- release-notes: Release notes\n"
                       "- reviewer: Careful code review")
    assert skills_in(second, run.provider.calls[1]) == []
    [active] = skills_in(third, run.provider.calls[2])
    assert active == f'<active_skills>\n<skill name="release-notes">\n{NOTES.strip()}\n</skill>\n</active_skills>'
    results = third["messages"][-1]["content"]
    assert results[0]["content"].startswith("Skill 'release-notes' is active")
    assert results[1]["is_error"] is True and "no skill named 'nope'" in results[1]["content"]


def test_no_skills_no_skill_tool(store: Store, api: LoopbackAPI, tmp_path: Path) -> None:
    ws = tmp_path / "empty"
    ws.mkdir()
    api.queue(done())
    run = start(store, api, ws, Config(skills=SkillsConfig(dirs=[str(tmp_path / "nowhere")])))
    run.send("hi")
    assert "skill" not in [t["name"] for t in run.bodies[0]["tools"]]
    assert not run.warnings()
