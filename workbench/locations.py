"""Where the workbench keeps its files. Nothing here touches the disk until called."""

from __future__ import annotations

import os
from pathlib import Path

APP_NAME = "context-workbench"


def data_dir() -> Path:
    override = os.environ.get("WORKBENCH_DATA_DIR")
    if override:
        return Path(override)
    import platformdirs  # deferred, as the other modules below: a command given --db needs none of them

    return Path(platformdirs.user_data_dir(APP_NAME))


def default_db_path() -> Path:
    return data_dir() / "workbench.db"


def config_path() -> Path:
    override = os.environ.get("WORKBENCH_CONFIG")
    if override:
        return Path(override)
    import platformdirs

    return Path(platformdirs.user_config_dir(APP_NAME)) / "config.toml"


def log_path() -> Path:
    return data_dir() / "workbench.log"


def styles_dir() -> Path:
    """The .tcss files: inside the package when installed, at the repository root in a checkout."""
    package = Path(__file__).resolve().parent
    installed = package / "styles"
    return installed if installed.is_dir() else package.parent / "styles"


DEMO_RESOURCE = "demo_session.jsonl"


def demo_path() -> Path:
    """The bundled demo transcript (shipped in the package's data)."""
    from importlib import resources

    return Path(str(resources.files("workbench.data").joinpath(DEMO_RESOURCE)))


def tool_outputs_dir() -> Path:
    """Where tool outputs too large for the context are spilled (spec 003: ``ai_tool_outputs`` in the temp
    directory), one directory per user so that nobody else's files are read or overwritten."""
    override = os.environ.get("WORKBENCH_TOOL_OUTPUTS")
    if override:
        return Path(override)
    import getpass
    import tempfile

    try:
        user = getpass.getuser()
    except (KeyError, OSError):  # no login name (a container's bare uid): the uid names the directory
        user = str(os.getuid()) if hasattr(os, "getuid") else "user"
    return Path(tempfile.gettempdir()) / f"ai_tool_outputs-{user}"
