"""``skill``: the model lists, activates and deactivates skills (instructions added to the system prompt)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Literal

from pydantic import BaseModel, Field

from workbench.engine.agent.tools.base import Tool, ToolContext, ToolError, ToolOutput

if TYPE_CHECKING:
    from workbench.engine.agent.skills import SkillSet

SKILL_TOOL = "skill"


class SkillTool(Tool):
    name = SKILL_TOOL
    description = (
        "List the available skills (instruction sets for particular kinds of work), or activate / "
        "deactivate one by name; an active skill's instructions are in the system prompt."
    )

    class Input(BaseModel):
        action: Literal["list", "activate", "deactivate"] = "list"
        name: str | None = Field(default=None, description="the skill, for activate and deactivate")

    def __init__(self, skills: SkillSet) -> None:
        self.skills = skills

    async def run(self, args: Input, ctx: ToolContext) -> ToolOutput:
        from workbench.engine.agent.skills import SkillError

        self.skills.ensure_loaded()
        if args.action == "list":
            if not self.skills.library:
                return ToolOutput("No skills are available.")
            lines = [
                f"- {s.name}{' (active)' if s.name in self.skills.active else ''}: {s.description}"
                for s in self.skills.library.values()
            ]
            return ToolOutput("\n".join(lines))
        if not args.name:
            raise ToolError(f"{args.action} needs the skill's name")
        try:
            if args.action == "activate":
                skill = self.skills.activate(args.name)
                return ToolOutput(f"Skill {skill.name!r} is active; its instructions are in the system prompt "
                                  "from your next request.")
            skill = self.skills.deactivate(args.name)
            return ToolOutput(f"Skill {skill.name!r} is no longer active.")
        except SkillError as exc:
            raise ToolError(str(exc)) from exc
