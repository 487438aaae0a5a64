"""Skills: markdown instruction files the user or the model switches on and off.

A skill is either ``<dir>/<name>.md`` or ``<dir>/<name>/SKILL.md`` (Claude Code's layout)
in one of the configured directories. Optional front matter gives its name and a
one-line description::

    ---
    name: release-notes
    description: How we write release notes
    ---
    (the instructions)

Active skills form one system-prompt section (kind ``skills``); the ``skill`` tool and
:class:`SkillSet` methods change which are active.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from workbench.engine.agent.tools.confined import read_text_under
from workbench.engine.errors import WorkbenchError
from workbench.engine.settings.sections import SkillsConfig

_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.\-]*$")




class SkillError(WorkbenchError):
    """An unknown skill name; the message lists the known ones."""


@dataclass(frozen=True)
class Skill:
    name: str
    description: str
    path: Path
    body: str


def parse_skill(text: str, default_name: str, path: Path) -> Skill:
    meta: dict[str, str] = {}
    body = text
    lines = text.splitlines()
    if lines and lines[0].strip() == "---":
        end = next((i for i, line in enumerate(lines[1:], 1) if line.strip() == "---"), None)
        if end is not None:
            for line in lines[1:end]:
                key, sep, value = line.partition(":")
                if sep:
                    meta[key.strip().lower()] = value.strip().strip("\"'")
            body = "\n".join(lines[end + 1 :])
    body = body.strip()
    name = meta.get("name") or default_name
    description = meta.get("description") or next(
        (line.lstrip("# ").strip() for line in body.splitlines() if line.strip()), "")
    return Skill(name=name, description=description[:200], path=path, body=body)


def _candidates(folder: Path) -> list[tuple[str, Path]]:
    out: list[tuple[str, Path]] = []
    for child in sorted(folder.iterdir()):
        if child.name.startswith("."):
            continue
        if child.is_dir() and (child / "SKILL.md").exists():
            out.append((child.name, child / "SKILL.md"))
        elif child.suffix.lower() == ".md" and not child.is_dir():
            out.append((child.stem, child))
    return out


def _root(folder: Path, workspace: Path | None) -> Path:
    """What a skill folder's files are confined to: the workspace for a folder in it (so a skills folder that
    is a link out of the workspace is refused too), else the folder itself (the user's own, named in the config)."""
    if workspace is not None and not folder.is_absolute():
        folder = workspace / folder
    if workspace is not None and folder.is_relative_to(workspace):
        return workspace.resolve()
    try:
        return folder.resolve()
    except RuntimeError:  # a loop of links: every file in it is refused
        return folder


def load_skills(folders: list[Path], max_bytes: int, workspace: Path | None = None) -> tuple[dict[str, Skill], list[str]]:
    """Every skill found, by name, and a warning for each file that could not be used; each read by the file
    tools' rules, under the workspace (or the skills folder outside it the config names)."""
    skills: dict[str, Skill] = {}
    warnings: list[str] = []
    for folder in folders:
        if not folder.is_dir():
            if folder.exists():
                warnings.append(f"skills directory {folder} is not a directory")
            continue
        try:
            candidates = _candidates(folder)
        except OSError as exc:
            warnings.append(f"cannot list skills directory {folder} ({exc.strerror or type(exc).__name__})")
            continue
        root = _root(folder, workspace)
        for default_name, path in candidates:
            text, problem = read_text_under(root, str(path), max_bytes)
            if text is None:
                warnings.append(f"skill {path}: {problem or 'no such file'}; skipped")
                continue
            skill = parse_skill(text, default_name, path)
            if not _NAME.match(skill.name):
                warnings.append(f"skill {path} has an unusable name {skill.name!r}; skipped")
            elif skill.name in skills:
                warnings.append(f"skill {skill.name!r} in {path} is shadowed by {skills[skill.name].path}")
            else:
                skills[skill.name] = skill
    return skills, warnings


class SkillSet:
    """The skills one agent knows and which of them are active (loaded on first use)."""

    def __init__(self, workspace: Path, config: SkillsConfig | None = None, *, enabled: bool = True) -> None:
        self.workspace = workspace
        self.config = config or SkillsConfig()
        self.enabled = enabled
        self.library: dict[str, Skill] = {}
        self.active: list[str] = []
        self._loaded = False

    def folders(self) -> list[Path]:
        out = []
        for entry in self.config.dirs:
            path = Path(entry).expanduser()
            out.append(path if path.is_absolute() else self.workspace / path)
        return out

    def load(self) -> list[str]:
        """Read the skill directories (again); returns warnings."""
        self._loaded = True
        if not self.enabled:
            return []
        self.library, warnings = load_skills(self.folders(), self.config.max_file_bytes, self.workspace)
        wanted = self.active or list(self.config.active)
        self.active = []
        for name in wanted:
            if name in self.library:
                self.active.append(name)
            else:
                warnings.append(f"skill {name!r} (skills.active) not found in {', '.join(map(str, self.folders()))}")
        return warnings

    def ensure_loaded(self) -> list[str]:
        return [] if self._loaded else self.load()

    def get(self, name: str) -> Skill:
        self.ensure_loaded()
        skill = self.library.get(name)
        if skill is None:
            known = ", ".join(sorted(self.library)) or "none"
            raise SkillError(f"no skill named {name!r}; known skills: {known}")
        return skill

    def activate(self, name: str) -> Skill:
        skill = self.get(name)
        if name not in self.active:
            self.active.append(name)
        return skill

    def deactivate(self, name: str) -> Skill:
        skill = self.get(name)
        if name in self.active:
            self.active.remove(name)
        return skill

    def section_text(self) -> str | None:
        if not self.active:
            return None
        blocks = [f'<skill name="{name}">\n{self.library[name].body}\n</skill>' for name in self.active]
        return "<active_skills>\n" + "\n".join(blocks) + "\n</active_skills>"
