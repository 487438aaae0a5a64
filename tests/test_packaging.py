"""The wheel ships the Textual styles, and an installed (non-editable) package finds them."""

from __future__ import annotations

import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
from helpers import REPO_ROOT


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    if not (REPO_ROOT / "pyproject.toml").is_file():
        pytest.skip(f"no pyproject.toml at {REPO_ROOT}: not running from a source checkout")
    pytest.importorskip("hatchling", reason="building without isolation needs hatchling (in the 'test' extra)")
    out = tmp_path_factory.mktemp("wheel")
    result = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "--no-index", "-q", "-w", str(out), str(REPO_ROOT)],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=out,
    )
    assert result.returncode == 0, result.stderr
    wheels = list(out.glob("context_workbench-*.whl"))
    assert len(wheels) == 1, list(out.iterdir())
    return wheels[0]


def _repo_styles() -> list[str]:
    names = sorted(p.name for p in (REPO_ROOT / "styles").glob("*.tcss"))
    assert names, "the repository has no styles/*.tcss"
    return names


def test_wheel_contains_the_styles(wheel: Path) -> None:
    with zipfile.ZipFile(wheel) as zf:
        names = set(zf.namelist())
        assert {f"workbench/styles/{n}" for n in _repo_styles()} <= names
        for n in _repo_styles():
            assert zf.read(f"workbench/styles/{n}") == (REPO_ROOT / "styles" / n).read_bytes()
    assert "workbench/engine/transcript/store.py" in names
    assert not any(n.startswith(("tests/", ".venv/", "styles/")) for n in names), "only the package is shipped"


def test_wheel_ships_the_token_vocabulary(wheel: Path) -> None:
    """Counting needs no network: the vocabulary is in the wheel, byte for byte."""
    shipped = REPO_ROOT / "workbench" / "data" / "cl100k_base.tiktoken"
    with zipfile.ZipFile(wheel) as zf:
        assert zf.read("workbench/data/cl100k_base.tiktoken") == shipped.read_bytes()


def test_installed_package_finds_its_styles(wheel: Path, tmp_path: Path) -> None:
    target = tmp_path / "site"
    install = subprocess.run(
        [sys.executable, "-m", "pip", "install", "--no-deps", "--no-index", "-q", "--target", str(target), str(wheel)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert install.returncode == 0, install.stderr
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env["PYTHONPATH"] = str(target)
    script = (
        "import workbench, workbench.locations as loc\n"
        "print(workbench.__file__)\n"
        "d = loc.styles_dir()\n"
        "print(d)\n"
        "print(','.join(sorted(p.name for p in d.glob('*.tcss'))))\n"
    )
    result = subprocess.run([sys.executable, "-c", script], cwd=elsewhere, env=env, capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    package_file, styles, tcss = result.stdout.strip().splitlines()
    resolved = target.resolve()
    assert Path(package_file).resolve().is_relative_to(resolved), "the installed copy was imported, not the checkout"
    assert Path(styles).resolve().is_relative_to(resolved)
    assert tcss.split(",") == _repo_styles()
