"""Architecture: the engine never imports the UI (import-linter), and importing has no side effects."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest
from helpers import REPO_ROOT

LINT = (
    "import sys\n"
    "from importlinter.cli import lint_imports\n"
    "sys.exit(lint_imports(config_filename='pyproject.toml', no_cache=True, no_logo=True))\n"
)


def _lint(cwd: Path, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    pytest.importorskip("importlinter", reason="import-linter is in the 'test' extra")
    return subprocess.run([sys.executable, "-c", LINT], cwd=cwd, env=env, capture_output=True, text=True, timeout=120)


def _pyproject() -> dict:  # type: ignore[type-arg]
    path = REPO_ROOT / "pyproject.toml"
    if not path.is_file():
        pytest.skip("not running from a source checkout")
    return tomllib.loads(path.read_text(encoding="utf-8"))


def test_pyproject_declares_the_engine_ui_contract() -> None:
    config = _pyproject()["tool"]["importlinter"]
    assert config["root_package"] == "workbench"
    forbidden = [c for c in config["contracts"] if c["type"] == "forbidden"]
    assert any(
        "workbench.engine" in c["source_modules"] and {"textual", "workbench.tui"} <= set(c["forbidden_modules"])
        for c in forbidden
    ), forbidden


def test_import_linter_contracts_hold() -> None:
    _pyproject()
    result = _lint(REPO_ROOT)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "Contracts: " in result.stdout and " broken" in result.stdout
    assert "0 broken" in result.stdout


def test_the_contract_catches_an_engine_import_of_textual(tmp_path: Path) -> None:
    """Guard against a vacuous contract: the same config on a copy that breaks the rule must fail."""
    _pyproject()
    shutil.copytree(REPO_ROOT / "workbench", tmp_path / "workbench", ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(REPO_ROOT / "pyproject.toml", tmp_path / "pyproject.toml")
    budget = tmp_path / "workbench" / "engine" / "context" / "budget.py"
    budget.write_text(budget.read_text(encoding="utf-8") + "\nimport textual  # deliberate violation\n", encoding="utf-8")
    env = {**os.environ, "PYTHONPATH": str(tmp_path)}
    result = _lint(tmp_path, env)
    output = result.stdout + result.stderr
    assert result.returncode != 0
    assert "workbench.engine.context.budget -> textual" in output, output


def test_importing_the_package_creates_nothing(tmp_path: Path) -> None:
    """No directories, databases or logs at import time, wherever HOME and the cwd are."""
    home = tmp_path / "home"
    cwd = tmp_path / "cwd"
    home.mkdir()
    cwd.mkdir()
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("WORKBENCH_", "XDG_")) and k not in {"HOME", "APPDATA", "LOCALAPPDATA"}
    }
    env.update(HOME=str(home), PYTHONDONTWRITEBYTECODE="1")
    script = (
        "import importlib, pkgutil, workbench\n"
        "names = [m.name for m in pkgutil.walk_packages(workbench.__path__, 'workbench.')\n"
        "         if not m.name.endswith('__main__')]\n"
        "for name in names:\n"
        "    importlib.import_module(name)\n"
        "print(len(names))\n"
    )
    result = subprocess.run([sys.executable, "-c", script], cwd=cwd, env=env, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    assert int(result.stdout.strip()) > 10, "the walk found the package's modules"
    assert list(home.rglob("*")) == []
    assert list(cwd.rglob("*")) == []


CYCLES = (
    "import sys, grimp\n"
    "graph = grimp.build_graph('workbench', cache_dir=None)\n"
    "edges = {m: sorted(graph.find_modules_directly_imported_by(m)) for m in graph.modules}\n"
    "index, low, stack, on, found, counter = {}, {}, [], set(), [], [0]\n"
    "def visit(v):\n"
    "    index[v] = low[v] = counter[0]; counter[0] += 1; stack.append(v); on.add(v)\n"
    "    for w in edges[v]:\n"
    "        if w not in index:\n"
    "            visit(w); low[v] = min(low[v], low[w])\n"
    "        elif w in on:\n"
    "            low[v] = min(low[v], index[w])\n"
    "    if low[v] == index[v]:\n"
    "        group = []\n"
    "        while True:\n"
    "            w = stack.pop(); on.discard(w); group.append(w)\n"
    "            if w == v: break\n"
    "        if len(group) > 1: found.append(sorted(group))\n"
    "sys.setrecursionlimit(10000)\n"
    "for m in sorted(edges):\n"
    "    if m not in index: visit(m)\n"
    "print(found)\n"
)
"""Prints every import cycle among workbench modules (strongly connected groups, TYPE_CHECKING imports too)."""


def _cycles(root: Path) -> str:
    pytest.importorskip("grimp", reason="grimp comes with import-linter, in the 'test' extra")
    env = {**os.environ, "PYTHONPATH": str(root)}
    result = subprocess.run([sys.executable, "-c", CYCLES], cwd=root, env=env, capture_output=True, text=True,
                            timeout=120)
    assert result.returncode == 0, result.stderr
    return result.stdout.strip()


def test_no_module_of_the_workbench_imports_itself_round_a_cycle() -> None:
    _pyproject()
    assert _cycles(REPO_ROOT) == "[]"


def test_the_cycle_check_catches_a_cycle(tmp_path: Path) -> None:
    """Guard against a vacuous check: a copy in which a leaf imports back up must show the cycle."""
    _pyproject()
    shutil.copytree(REPO_ROOT / "workbench", tmp_path / "workbench", ignore=shutil.ignore_patterns("__pycache__"))
    errors = tmp_path / "workbench" / "engine" / "errors.py"
    errors.write_text(errors.read_text(encoding="utf-8") + "\nimport workbench.engine.transcript.store  # deliberate cycle\n",
                      encoding="utf-8")
    found = _cycles(tmp_path)
    assert "workbench.engine.errors" in found and "workbench.engine.transcript.store" in found, found


def test_the_layers_contract_catches_the_app_importing_the_proxy(tmp_path: Path) -> None:
    """The app and the proxy are independent layers over the engine: a copy where one imports the other fails."""
    output = _lint_a_copy_importing(tmp_path, "tui/widgets/format.py", "workbench.proxy.server")
    assert "Layers: the command line over the app and the proxy, both over the engine BROKEN" in output, output


def test_the_engine_layers_contract_catches_the_transcript_importing_the_context(tmp_path: Path) -> None:
    """The engine's folders are its layers: a copy where the transcript layer imports the context above it fails."""
    output = _lint_a_copy_importing(tmp_path, "engine/transcript/sessions.py", "workbench.engine.context.budget")
    assert "Engine layers:" in output and "BROKEN" in output, output
    assert "workbench.engine.transcript.sessions -> workbench.engine.context.budget" in output, output


def test_the_projector_contract_catches_the_projector_importing_the_estimator(tmp_path: Path) -> None:
    """The projector produces what the estimator consumes and never calls it: a copy where it imports it fails."""
    output = _lint_a_copy_importing(tmp_path, "engine/context/projector.py", "workbench.engine.context.estimation")
    assert "The projector and its records know nothing of estimates BROKEN" in output, output


def _lint_a_copy_importing(tmp_path: Path, module: str, target: str) -> str:
    """import-linter's output on a copy of the package where ``module`` (under workbench/) imports ``target``;
    the run must fail."""
    _pyproject()
    shutil.copytree(REPO_ROOT / "workbench", tmp_path / "workbench", ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(REPO_ROOT / "pyproject.toml", tmp_path / "pyproject.toml")
    path = tmp_path / "workbench" / module
    path.write_text(path.read_text(encoding="utf-8") + f"\nimport {target}  # deliberate\n", encoding="utf-8")
    result = _lint(tmp_path, {**os.environ, "PYTHONPATH": str(tmp_path)})
    assert result.returncode != 0
    return result.stdout + result.stderr
